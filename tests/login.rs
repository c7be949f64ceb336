//! The interactive login flow against a scripted Telegram and terminal (no network): the
//! prompt names where the code went, an expired code brings a new one, a login email that
//! must be set up first is explained, and every password try gets a fresh challenge.

use std::collections::VecDeque;
use std::sync::Mutex;

use personad::adapters::mtproto::login::{
    CodeVia, LoginApi, LoginError, PasswordAnswer, Prompter, SendCodeAnswer, SentCode,
    SignInAnswer, run_login,
};
use personad::core::time::BoxFuture;

#[derive(Default)]
struct FakeApi {
    sends: Mutex<VecDeque<Result<SendCodeAnswer, LoginError>>>,
    sign_ins: Mutex<VecDeque<SignInAnswer>>,
    /// Correct password; challenges are numbered and single-use.
    password: &'static str,
    challenges_issued: Mutex<u32>,
    used_challenges: Mutex<Vec<u32>>,
    hashes_used: Mutex<Vec<String>>,
}

impl LoginApi for FakeApi {
    type Challenge = u32;
    fn send_code(&self, _phone: &str) -> BoxFuture<'_, Result<SendCodeAnswer, LoginError>> {
        let next = self
            .sends
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Err(LoginError::Failed("no more codes".into())));
        Box::pin(async move { next })
    }
    fn sign_in<'a>(
        &'a self,
        _phone: &'a str,
        hash: &'a str,
        _code: &'a str,
    ) -> BoxFuture<'a, Result<SignInAnswer, LoginError>> {
        self.hashes_used.lock().unwrap().push(hash.to_string());
        let next = self
            .sign_ins
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(SignInAnswer::CodeInvalid);
        Box::pin(async move { Ok(next) })
    }
    fn password_challenge(&self) -> BoxFuture<'_, Result<(u32, Option<String>), LoginError>> {
        let mut n = self.challenges_issued.lock().unwrap();
        *n += 1;
        let id = *n;
        Box::pin(async move { Ok((id, Some("pet".into()))) })
    }
    fn check_password(
        &self,
        challenge: u32,
        password: String,
    ) -> BoxFuture<'_, Result<PasswordAnswer, LoginError>> {
        let reused = self.used_challenges.lock().unwrap().contains(&challenge);
        self.used_challenges.lock().unwrap().push(challenge);
        let ok = !reused && password == self.password;
        Box::pin(async move {
            if reused {
                // Telegram rejects a reused SRP challenge even with the right password.
                Ok(PasswordAnswer::Wrong)
            } else if ok {
                Ok(PasswordAnswer::LoggedIn("Wren Owner".into()))
            } else {
                Ok(PasswordAnswer::Wrong)
            }
        })
    }
}

#[derive(Default)]
struct FakeTerminal {
    codes: Mutex<VecDeque<&'static str>>,
    passwords: Mutex<VecDeque<&'static str>>,
    prompts: Mutex<Vec<String>>,
    said: Mutex<Vec<String>>,
}

impl Prompter for FakeTerminal {
    fn code(&self, prompt: String) -> BoxFuture<'_, Result<String, LoginError>> {
        self.prompts.lock().unwrap().push(prompt);
        let code = self.codes.lock().unwrap().pop_front().unwrap_or("00000");
        Box::pin(async move { Ok(code.to_string()) })
    }
    fn password(&self, hint: Option<String>) -> BoxFuture<'_, Result<String, LoginError>> {
        self.prompts
            .lock()
            .unwrap()
            .push(format!("password (hint {})", hint.unwrap_or_default()));
        let pw = self.passwords.lock().unwrap().pop_front().unwrap_or("");
        Box::pin(async move { Ok(pw.to_string()) })
    }
    fn say(&self, line: &str) {
        self.said.lock().unwrap().push(line.to_string());
    }
}

fn sent(hash: &str, via: CodeVia) -> Result<SendCodeAnswer, LoginError> {
    Ok(SendCodeAnswer::Sent(SentCode {
        hash: hash.into(),
        via,
    }))
}

/// The code prompt names where the code went; an expired code asks Telegram for a new one
/// and signs in with the new code's hash.
#[tokio::test]
async fn prompt_names_the_channel_and_an_expired_code_brings_a_new_one() {
    let api = FakeApi {
        sends: Mutex::new([sent("h1", CodeVia::App), sent("h2", CodeVia::Sms)].into()),
        sign_ins: Mutex::new(
            [
                SignInAnswer::CodeExpired,
                SignInAnswer::LoggedIn("Wren Owner".into()),
            ]
            .into(),
        ),
        ..FakeApi::default()
    };
    let term = FakeTerminal::default();
    let done = run_login(&api, &term, "+100").await;
    assert_eq!(done, Ok("logged in as Wren Owner".into()));
    let prompts = term.prompts.lock().unwrap().clone();
    assert!(prompts[0].contains("Telegram app"), "{prompts:?}");
    assert!(prompts[1].contains("SMS"), "{prompts:?}");
    assert_eq!(*api.hashes_used.lock().unwrap(), vec!["h1", "h2"]);
    assert!(term.said.lock().unwrap()[0].contains("expired"));
}

#[test]
fn email_and_call_prompts() {
    assert!(
        CodeVia::Email("j***@example.com".into())
            .prompt()
            .contains("j***@example.com")
    );
    assert!(CodeVia::Call.prompt().contains("calling"));
}

/// An account Telegram asks to set up a login email gets a clear message, not a prompt.
#[tokio::test]
async fn login_email_setup_required_is_explained() {
    let api = FakeApi {
        sends: Mutex::new([Err(LoginError::EmailSetupRequired)].into()),
        ..FakeApi::default()
    };
    let term = FakeTerminal::default();
    let err = run_login(&api, &term, "+100").await.unwrap_err();
    assert_eq!(err, LoginError::EmailSetupRequired);
    assert!(err.to_string().contains("login email"));
    assert!(term.prompts.lock().unwrap().is_empty());
}

/// After a wrong two-step password, the next try uses a fresh challenge (reusing the old
/// one fails even with the right password).
#[tokio::test]
async fn a_wrong_password_fetches_a_fresh_challenge() {
    let api = FakeApi {
        sends: Mutex::new([sent("h1", CodeVia::App)].into()),
        sign_ins: Mutex::new([SignInAnswer::PasswordNeeded].into()),
        password: "right",
        ..FakeApi::default()
    };
    let term = FakeTerminal {
        codes: Mutex::new(["12345"].into()),
        passwords: Mutex::new(["wrong", "right"].into()),
        ..FakeTerminal::default()
    };
    let done = run_login(&api, &term, "+100").await;
    assert_eq!(done, Ok("logged in as Wren Owner".into()));
    assert_eq!(*api.used_challenges.lock().unwrap(), vec![1, 2]);
    assert!(term.prompts.lock().unwrap()[1].contains("hint pet"));
}

/// Three wrong codes or passwords end the login with a clear error.
#[tokio::test]
async fn tries_are_bounded() {
    let api = FakeApi {
        sends: Mutex::new([sent("h1", CodeVia::App)].into()),
        ..FakeApi::default()
    };
    let term = FakeTerminal::default();
    assert_eq!(
        run_login(&api, &term, "+100").await,
        Err(LoginError::NoValidCode)
    );
    let api = FakeApi {
        sends: Mutex::new([sent("h1", CodeVia::App)].into()),
        sign_ins: Mutex::new([SignInAnswer::PasswordNeeded].into()),
        password: "right",
        ..FakeApi::default()
    };
    assert_eq!(
        run_login(&api, &FakeTerminal::default(), "+100").await,
        Err(LoginError::WrongPassword)
    );
    let api = FakeApi {
        sends: Mutex::new([sent("h1", CodeVia::App)].into()),
        sign_ins: Mutex::new([SignInAnswer::SignUpRequired].into()),
        ..FakeApi::default()
    };
    assert_eq!(
        run_login(&api, &FakeTerminal::default(), "+100").await,
        Err(LoginError::SignUpRequired)
    );
}
