//! The interactive login and logout flows against a scripted Telegram and terminal (no
//! network): the prompt names where the code went, an expired code is sent again with
//! resendCode, the user can ask for an SMS when Telegram offers one, a login email that must
//! be set up first is explained, every password try gets a fresh challenge, and a failed
//! sign-out keeps the session file.

use std::collections::VecDeque;
use std::sync::Mutex;

use personad::adapters::mtproto::login::{
    CodeVia, LoggedOut, LoginApi, LoginError, LogoutApi, PasswordAnswer, Prompter, SendCodeAnswer,
    SentCode, SignInAnswer, run_login, run_logout,
};
use personad::core::model::TelegramError;
use personad::core::time::BoxFuture;

#[derive(Default)]
struct FakeApi {
    sends: Mutex<VecDeque<Result<SendCodeAnswer, LoginError>>>,
    /// What auth.resendCode answers, and the hashes it was asked with.
    resends: Mutex<VecDeque<Result<Option<SendCodeAnswer>, LoginError>>>,
    resent_hashes: Mutex<Vec<String>>,
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
    fn resend_code<'a>(
        &'a self,
        _phone: &'a str,
        hash: &'a str,
    ) -> BoxFuture<'a, Result<Option<SendCodeAnswer>, LoginError>> {
        self.resent_hashes.lock().unwrap().push(hash.to_string());
        let next = self
            .resends
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Err(LoginError::Failed("no more resends".into())));
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

fn code(hash: &str, via: CodeVia, next: Option<CodeVia>) -> SendCodeAnswer {
    SendCodeAnswer::Sent(SentCode {
        hash: hash.into(),
        via,
        next,
    })
}

fn sent(hash: &str, via: CodeVia) -> Result<SendCodeAnswer, LoginError> {
    Ok(code(hash, via, None))
}

/// The code prompt names where the code went; an expired code is sent again with
/// auth.resendCode on its own hash (not a second auth.sendCode, which Telegram counts as a
/// new request and may refuse), and the login signs in with the new code's hash.
#[tokio::test]
async fn prompt_names_the_channel_and_an_expired_code_brings_a_new_one() {
    let api = FakeApi {
        sends: Mutex::new([sent("h1", CodeVia::App)].into()),
        resends: Mutex::new([Ok(Some(code("h2", CodeVia::Sms, None)))].into()),
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
    assert_eq!(*api.resent_hashes.lock().unwrap(), vec!["h1"]);
    assert!(term.said.lock().unwrap()[0].contains("expired"));
}

/// When the code request itself expired (resendCode answers PHONE_CODE_EXPIRED), a new one
/// is asked for with auth.sendCode.
#[tokio::test]
async fn an_expired_code_request_is_made_anew() {
    let api = FakeApi {
        sends: Mutex::new([sent("h1", CodeVia::App), sent("h3", CodeVia::App)].into()),
        resends: Mutex::new([Ok(None)].into()),
        sign_ins: Mutex::new(
            [
                SignInAnswer::CodeExpired,
                SignInAnswer::LoggedIn("Wren Owner".into()),
            ]
            .into(),
        ),
        ..FakeApi::default()
    };
    let done = run_login(&api, &FakeTerminal::default(), "+100").await;
    assert_eq!(done, Ok("logged in as Wren Owner".into()));
    assert_eq!(*api.hashes_used.lock().unwrap(), vec!["h1", "h3"]);
}

/// When Telegram says it would send the code by SMS next, the prompt says so, and typing
/// `sms` asks for it (resendCode) without spending a try; the SMS code then signs in.
#[tokio::test]
async fn the_user_can_ask_for_the_code_by_sms_when_telegram_offers_it() {
    let api = FakeApi {
        sends: Mutex::new([Ok(code("h1", CodeVia::App, Some(CodeVia::Sms)))].into()),
        resends: Mutex::new([Ok(Some(code("h2", CodeVia::Sms, Some(CodeVia::Call))))].into()),
        sign_ins: Mutex::new([SignInAnswer::LoggedIn("Wren Owner".into())].into()),
        ..FakeApi::default()
    };
    let term = FakeTerminal {
        codes: Mutex::new(["SMS", "12345"].into()),
        ..FakeTerminal::default()
    };
    let done = run_login(&api, &term, "+100").await;
    assert_eq!(done, Ok("logged in as Wren Owner".into()));
    let prompts = term.prompts.lock().unwrap().clone();
    assert!(
        prompts[0].contains("Telegram app") && prompts[0].contains("type sms"),
        "{prompts:?}"
    );
    assert!(
        prompts[1].contains("sent by SMS") && prompts[1].contains("type call"),
        "{prompts:?}"
    );
    assert_eq!(*api.resent_hashes.lock().unwrap(), vec!["h1"]);
    assert_eq!(
        *api.hashes_used.lock().unwrap(),
        vec!["h2"],
        "`sms` is no code"
    );
    // Without an offer, `sms` is just a wrong code.
    let api = FakeApi {
        sends: Mutex::new([sent("h1", CodeVia::App)].into()),
        ..FakeApi::default()
    };
    let term = FakeTerminal {
        codes: Mutex::new(["sms"].into()),
        ..FakeTerminal::default()
    };
    let _ = run_login(&api, &term, "+100").await;
    assert!(api.resent_hashes.lock().unwrap().is_empty());
    assert!(!term.prompts.lock().unwrap()[0].contains("type sms"));
}

/// A scripted auth.logOut.
struct FakeLogout(Result<(), TelegramError>);

impl LogoutApi for FakeLogout {
    fn sign_out(&self) -> BoxFuture<'_, Result<(), TelegramError>> {
        let answer = self.0.clone();
        Box::pin(async move { answer })
    }
}

/// `login --logout`: the session file is deleted only once Telegram ended the
/// authorization (or no longer knows it); a failed sign-out keeps it (the authorization is
/// still live) and says so.
#[tokio::test]
async fn a_failed_sign_out_keeps_the_session_file() {
    let removed = Mutex::new(0);
    let remove = || async {
        *removed.lock().unwrap() += 1;
        Ok(())
    };
    let err = run_logout(
        &FakeLogout(Err(TelegramError::Network("i/o error (TimedOut)".into()))),
        remove,
    )
    .await
    .unwrap_err();
    assert_eq!(*removed.lock().unwrap(), 0, "the file was deleted");
    let said = err.to_string();
    assert!(
        said.contains("sign-out failed")
            && said.contains("kept")
            && said.contains("still live")
            && said.contains("TimedOut"),
        "{said}"
    );
    let flood = run_logout(
        &FakeLogout(Err(TelegramError::FloodWait { secs: 30 })),
        remove,
    )
    .await;
    assert!(
        matches!(flood, Err(LoginError::SignOutFailed(_))),
        "{flood:?}"
    );
    assert_eq!(*removed.lock().unwrap(), 0);
    let done = run_logout(&FakeLogout(Ok(())), remove).await;
    assert_eq!(done, Ok(LoggedOut::SignedOut));
    assert_eq!(*removed.lock().unwrap(), 1);
    let dead = run_logout(
        &FakeLogout(Err(TelegramError::Unauthorized(
            "AUTH_KEY_UNREGISTERED (401)".into(),
        ))),
        remove,
    )
    .await;
    assert_eq!(dead, Ok(LoggedOut::AlreadyEnded));
    assert_eq!(*removed.lock().unwrap(), 2);
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
