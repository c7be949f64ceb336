//! The interactive login and the logout of a user account: the flows (pure, over the
//! [`LoginApi`], [`LogoutApi`] and [`Prompter`] traits, tested offline with fakes), their
//! grammers implementation, and the terminal as the prompter.
//!
//! The login asks for the code naming where Telegram sent it (app, SMS, call, email) and,
//! when Telegram offers another way (an SMS, a call), lets the user ask for it by typing
//! `sms` (or `call`) instead of a code; a code that expired is sent again with
//! `auth.resendCode` (a new `auth.sendCode` only when the request itself expired). It
//! explains an account that must first set up a login email, and on a wrong two-step
//! password fetches a fresh password challenge (`account.getPassword`) before the next try,
//! since the SRP challenge is single-use. The logout deletes the session file only once
//! Telegram ended the authorization (or no longer knows it): a failed sign-out keeps the file,
//! since its authorization is still live. It never logs codes or passwords.

use std::sync::Arc;

use grammers_client::Client;
use grammers_client::client::PasswordToken;
use grammers_client::session::Session;
use grammers_client::session::types::{PeerAuth, PeerInfo, UpdateState, UpdatesState};
use grammers_client::tl;

use crate::adapters::mtproto::errors::classify;
use crate::adapters::mtproto::guarded::GuardedSession;
use crate::core::model::{LocalFailure, TelegramError};
use crate::core::time::BoxFuture;

/// How many codes and passwords are tried before giving up.
pub(crate) const TRIES: usize = 3;

/// Where Telegram sent the login code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodeVia {
    App,
    Sms,
    Call,
    /// By email, to the (masked) address shown.
    Email(String),
    Other,
}

impl CodeVia {
    /// The code prompt.
    pub fn prompt(&self) -> String {
        format!("Login code{}: ", self.where_sent())
    }

    fn where_sent(&self) -> String {
        match self {
            CodeVia::App => " (sent to your Telegram app on another device".into(),
            CodeVia::Sms => " (sent by SMS".into(),
            CodeVia::Call => " (Telegram is calling the phone".into(),
            CodeVia::Email(pattern) => format!(" (sent by email to {pattern}"),
            CodeVia::Other => String::new(),
        }
    }

    /// What the user types to get the code this way instead (when Telegram offers it).
    fn ask_word(&self) -> &'static str {
        match self {
            CodeVia::Sms => "sms",
            CodeVia::Call => "call",
            _ => "resend",
        }
    }

    /// How the switch is announced: "by SMS", "by a call".
    fn by(&self) -> &'static str {
        match self {
            CodeVia::Sms => "by SMS",
            CodeVia::Call => "by a call",
            _ => "another way",
        }
    }
}

/// A sent login code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentCode {
    pub hash: String,
    pub via: CodeVia,
    /// How Telegram would send the code if asked again (`auth.resendCode`), when it says.
    pub next: Option<CodeVia>,
}

impl SentCode {
    /// The code prompt: where the code went, and how to ask for it another way when
    /// Telegram offers one.
    pub fn prompt(&self) -> String {
        let opened = self.via.where_sent();
        match &self.next {
            None => self.via.prompt(),
            Some(next) => {
                let sep = if opened.is_empty() { " (" } else { "; " };
                format!(
                    "Login code{opened}{sep}type {} to get it {} instead): ",
                    next.ask_word(),
                    next.by()
                )
            }
        }
    }

    /// Whether the typed text asks for the code the other way.
    fn asks_again(&self, typed: &str) -> bool {
        self.next.as_ref().is_some_and(|next| {
            typed.eq_ignore_ascii_case(next.ask_word()) || typed.eq_ignore_ascii_case("resend")
        })
    }
}

/// What sending a code can answer besides a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendCodeAnswer {
    Sent(SentCode),
    /// Telegram logged the account in without a code (a known device token).
    LoggedIn(String),
}

/// What signing in with a code answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignInAnswer {
    LoggedIn(String),
    PasswordNeeded,
    CodeInvalid,
    CodeExpired,
    SignUpRequired,
}

/// What checking a password answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordAnswer {
    LoggedIn(String),
    Wrong,
}

/// Why the login failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    #[error(
        "Telegram asks this account to set up a login email first: open an official Telegram app, add a login email when it asks, then run login again"
    )]
    EmailSetupRequired,
    #[error("this phone number has no Telegram account; create one in an official app first")]
    SignUpRequired,
    #[error("no valid code after {TRIES} tries")]
    NoValidCode,
    #[error("wrong two-step verification password, {TRIES} times")]
    WrongPassword,
    /// Telegram did not confirm the sign-out: the authorization is still live, so the
    /// session file is kept.
    #[error(
        "sign-out failed ({0}); the session file is kept because its authorization is still live on Telegram: run the logout again later, or end that session in an official app (Settings > Devices)"
    )]
    SignOutFailed(TelegramError),
    /// Signed out, but the session file could not be deleted.
    #[error("signed out, but the session file could not be deleted: {0}")]
    RemoveSession(#[source] LocalFailure),
    /// Telegram refused a login call (its error, classified).
    #[error("{0}")]
    Telegram(#[from] TelegramError),
    /// The terminal could not be read (`what`: the terminal, the password).
    #[error("cannot read the {what}: {source}")]
    Prompt {
        what: &'static str,
        #[source]
        source: LocalFailure,
    },
    /// A login step failed for a reason said in words (Telegram returned no user, asks for
    /// a payment, a session write failed).
    #[error("{0}")]
    Failed(String),
}

/// A fresh two-step challenge and the password hint.
pub(crate) type ChallengeResult<C> = Result<(C, Option<String>), LoginError>;

/// The Telegram side of a login.
pub trait LoginApi: Send + Sync {
    /// The single-use two-step verification challenge.
    type Challenge: Send;
    fn send_code(&self, phone: &str) -> BoxFuture<'_, Result<SendCodeAnswer, LoginError>>;
    /// Asks for the code of `hash` again (`auth.resendCode`: it goes the way the last answer's
    /// `next` said). `None` when that code request itself expired (a new one is needed).
    fn resend_code<'a>(
        &'a self,
        phone: &'a str,
        hash: &'a str,
    ) -> BoxFuture<'a, Result<Option<SendCodeAnswer>, LoginError>>;
    fn sign_in<'a>(
        &'a self,
        phone: &'a str,
        hash: &'a str,
        code: &'a str,
    ) -> BoxFuture<'a, Result<SignInAnswer, LoginError>>;
    /// A fresh challenge and the password hint.
    fn password_challenge(&self) -> BoxFuture<'_, ChallengeResult<Self::Challenge>>;
    fn check_password(
        &self,
        challenge: Self::Challenge,
        password: String,
    ) -> BoxFuture<'_, Result<PasswordAnswer, LoginError>>;
}

/// The terminal side of a login.
pub trait Prompter: Send + Sync {
    fn code(&self, prompt: String) -> BoxFuture<'_, Result<String, LoginError>>;
    fn password(&self, hint: Option<String>) -> BoxFuture<'_, Result<String, LoginError>>;
    fn say(&self, line: &str);
}

/// The login flow: code (sent again when it expired, or another way when the user asks),
/// then the password when two-step verification is on (a fresh challenge for every try).
/// Returns "logged in as NAME".
pub async fn run_login<A: LoginApi, P: Prompter>(
    api: &A,
    prompter: &P,
    phone: &str,
) -> Result<String, LoginError> {
    let mut sent = match api.send_code(phone).await? {
        SendCodeAnswer::Sent(sent) => sent,
        SendCodeAnswer::LoggedIn(name) => return Ok(format!("logged in as {name}")),
    };
    let (mut tries, mut resends) = (0, 0);
    while tries < TRIES {
        let typed = prompter.code(sent.prompt()).await?;
        let typed = typed.trim();
        if sent.asks_again(typed) && resends < TRIES {
            resends += 1;
            if let Some(next) = &sent.next {
                prompter.say(&format!("Asking Telegram to send the code {}.", next.by()));
            }
            sent = match send_again(api, phone, &sent).await? {
                SendCodeAnswer::Sent(sent) => sent,
                SendCodeAnswer::LoggedIn(name) => return Ok(format!("logged in as {name}")),
            };
            continue;
        }
        tries += 1;
        match api.sign_in(phone, &sent.hash, typed).await? {
            SignInAnswer::LoggedIn(name) => return Ok(format!("logged in as {name}")),
            SignInAnswer::CodeInvalid => prompter
                .say("That code is not valid. Codes pasted into any Telegram chat stop working."),
            SignInAnswer::CodeExpired => {
                prompter.say("That code expired; Telegram sends a new one.");
                sent = match send_again(api, phone, &sent).await? {
                    SendCodeAnswer::Sent(sent) => sent,
                    SendCodeAnswer::LoggedIn(name) => return Ok(format!("logged in as {name}")),
                };
            }
            SignInAnswer::SignUpRequired => return Err(LoginError::SignUpRequired),
            SignInAnswer::PasswordNeeded => return password_flow(api, prompter).await,
        }
    }
    Err(LoginError::NoValidCode)
}

/// The code of `sent` once more (`auth.resendCode`); a new request (`auth.sendCode`) when
/// that one expired.
async fn send_again<A: LoginApi>(
    api: &A,
    phone: &str,
    sent: &SentCode,
) -> Result<SendCodeAnswer, LoginError> {
    match api.resend_code(phone, &sent.hash).await? {
        Some(answer) => Ok(answer),
        None => api.send_code(phone).await,
    }
}

/// The Telegram side of a logout.
pub trait LogoutApi: Send + Sync {
    /// `auth.logOut`.
    fn sign_out(&self) -> BoxFuture<'_, Result<(), TelegramError>>;
}

/// How a logout ended (the session file is gone either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoggedOut {
    /// Telegram ended the authorization.
    SignedOut,
    /// Telegram no longer knew the authorization (revoked or expired before).
    AlreadyEnded,
}

/// `login --logout`: signs the account out, and deletes the session (`remove_session`) only
/// when Telegram ended the authorization or no longer knows it. Any other failure (no
/// network, a flood wait) keeps the file: the authorization is still live, and deleting its
/// only key would leave it running with no way to end it from here.
pub async fn run_logout<A, R, Fut>(api: &A, remove_session: R) -> Result<LoggedOut, LoginError>
where
    A: LogoutApi + ?Sized,
    R: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<(), LocalFailure>>,
{
    let outcome = match api.sign_out().await {
        Ok(()) => LoggedOut::SignedOut,
        Err(TelegramError::Unauthorized(_)) => LoggedOut::AlreadyEnded,
        Err(e) => return Err(LoginError::SignOutFailed(e)),
    };
    remove_session().await.map_err(LoginError::RemoveSession)?;
    Ok(outcome)
}

async fn password_flow<A: LoginApi, P: Prompter>(
    api: &A,
    prompter: &P,
) -> Result<String, LoginError> {
    for _ in 0..TRIES {
        // The SRP challenge is single-use: a fresh one for every try.
        let (challenge, hint) = api.password_challenge().await?;
        let password = prompter.password(hint).await?;
        match api.check_password(challenge, password).await? {
            PasswordAnswer::LoggedIn(name) => return Ok(format!("logged in as {name}")),
            PasswordAnswer::Wrong => prompter.say("Wrong password."),
        }
    }
    Err(LoginError::WrongPassword)
}

/// Reads one line from the terminal (blocking, off the async threads).
async fn prompt(text: String) -> Result<String, LoginError> {
    tokio::task::spawn_blocking(move || -> std::io::Result<String> {
        use std::io::Write;
        let mut out = std::io::stderr();
        let _ = write!(out, "{text}");
        let _ = out.flush();
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)?;
        Ok(line.trim().to_string())
    })
    .await
    .map_err(std::io::Error::other)
    .and_then(|read| read)
    .map_err(|e| LoginError::Prompt {
        what: "terminal",
        source: LocalFailure::new(e),
    })
}

async fn prompt_password(hint: Option<String>) -> Result<String, LoginError> {
    tokio::task::spawn_blocking(move || {
        let label = match hint {
            Some(h) if !h.is_empty() => format!("Two-step verification password (hint: {h}): "),
            _ => "Two-step verification password: ".to_string(),
        };
        rpassword::prompt_password(label)
    })
    .await
    .map_err(std::io::Error::other)
    .and_then(|read| read)
    .map_err(|e| LoginError::Prompt {
        what: "password",
        source: LocalFailure::new(e),
    })
}

/// The terminal as the login prompter.
pub(crate) struct Terminal;

impl Prompter for Terminal {
    fn code(&self, text: String) -> BoxFuture<'_, Result<String, LoginError>> {
        Box::pin(prompt(text))
    }
    fn password(&self, hint: Option<String>) -> BoxFuture<'_, Result<String, LoginError>> {
        Box::pin(prompt_password(hint))
    }
    fn say(&self, line: &str) {
        eprintln!("{line}");
    }
}

/// The login calls on a grammers client (raw calls, so the code type is visible).
pub(crate) struct GrammersLogin {
    pub client: Client,
    pub session: Arc<GuardedSession>,
    pub api_id: i32,
    pub api_hash: String,
}

fn failed(e: &grammers_client::InvocationError) -> LoginError {
    LoginError::Telegram(classify(e))
}

fn user_name(user: &tl::enums::User) -> String {
    match user {
        tl::enums::User::User(u) => [u.first_name.as_deref(), u.last_name.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" "),
        tl::enums::User::Empty(_) => String::new(),
    }
}

impl GrammersLogin {
    /// What grammers does after a successful sign-in: cache the self user and store the
    /// current update state.
    async fn complete(&self, auth: tl::enums::auth::Authorization) -> Result<String, LoginError> {
        let tl::enums::auth::Authorization::Authorization(auth) = auth else {
            return Err(LoginError::SignUpRequired);
        };
        let state = self
            .client
            .invoke(&tl::functions::updates::GetState {})
            .await
            .ok();
        let tl::enums::User::User(u) = &auth.user else {
            return Err(LoginError::Failed("Telegram returned no user".into()));
        };
        self.session
            .cache_peer(PeerInfo::User {
                id: u.id,
                auth: u.access_hash.map(PeerAuth::from_hash),
                bot: Some(u.bot),
                is_self: Some(true),
            })
            .await
            .map_err(|e| LoginError::Failed(format!("session: {e}")))?;
        if let Some(tl::enums::updates::State::State(s)) = state {
            self.session
                .set_update_state(UpdateState::All(UpdatesState {
                    pts: s.pts,
                    qts: s.qts,
                    date: s.date,
                    seq: s.seq,
                    channels: Vec::new(),
                }))
                .await
                .map_err(|e| LoginError::Failed(format!("session: {e}")))?;
        }
        Ok(user_name(&auth.user))
    }
}

/// Where Telegram would send the code next.
fn next_via(next: Option<tl::enums::auth::CodeType>) -> Option<CodeVia> {
    use tl::enums::auth::CodeType as C;
    next.map(|n| match n {
        C::Sms | C::FragmentSms => CodeVia::Sms,
        C::Call | C::FlashCall | C::MissedCall => CodeVia::Call,
    })
}

impl GrammersLogin {
    /// Reads Telegram's answer to sending (or resending) a code.
    async fn sent_code(
        &self,
        answer: tl::enums::auth::SentCode,
    ) -> Result<SendCodeAnswer, LoginError> {
        match answer {
            tl::enums::auth::SentCode::Code(code) => {
                use tl::enums::auth::SentCodeType as T;
                let via = match code.r#type {
                    T::App(_) => CodeVia::App,
                    T::Sms(_)
                    | T::FragmentSms(_)
                    | T::FirebaseSms(_)
                    | T::SmsWord(_)
                    | T::SmsPhrase(_) => CodeVia::Sms,
                    T::Call(_) | T::FlashCall(_) | T::MissedCall(_) => CodeVia::Call,
                    T::EmailCode(e) => CodeVia::Email(e.email_pattern),
                    T::SetUpEmailRequired(_) => return Err(LoginError::EmailSetupRequired),
                };
                Ok(SendCodeAnswer::Sent(SentCode {
                    hash: code.phone_code_hash,
                    via,
                    next: next_via(code.next_type),
                }))
            }
            tl::enums::auth::SentCode::Success(s) => {
                self.complete(s.authorization).await.map(SendCodeAnswer::LoggedIn)
            }
            tl::enums::auth::SentCode::PaymentRequired(_) => Err(LoginError::Failed(
                "Telegram asks for a payment before it sends a login code to this number; log in from an official app first".into(),
            )),
        }
    }
}

/// The logout call on a grammers client.
pub(crate) struct GrammersLogout(pub Client);

impl LogoutApi for GrammersLogout {
    fn sign_out(&self) -> BoxFuture<'_, Result<(), TelegramError>> {
        Box::pin(async move {
            self.0
                .sign_out()
                .await
                .map(|_| ())
                .map_err(|e| classify(&e))
        })
    }
}

impl LoginApi for GrammersLogin {
    type Challenge = PasswordToken;

    fn send_code(&self, phone: &str) -> BoxFuture<'_, Result<SendCodeAnswer, LoginError>> {
        let phone = phone.to_string();
        Box::pin(async move {
            let request = tl::functions::auth::SendCode {
                phone_number: phone,
                api_id: self.api_id,
                api_hash: self.api_hash.clone(),
                settings: tl::types::CodeSettings {
                    allow_flashcall: false,
                    current_number: false,
                    allow_app_hash: false,
                    allow_missed_call: false,
                    allow_firebase: false,
                    logout_tokens: None,
                    token: None,
                    app_sandbox: None,
                    unknown_number: false,
                }
                .into(),
            };
            let answer = match self.client.invoke(&request).await {
                Ok(a) => a,
                // PHONE_MIGRATE_X: the account lives in another datacenter.
                Err(grammers_client::InvocationError::Rpc(e)) if e.code == 303 => {
                    let dc = e.value.and_then(|v| i32::try_from(v).ok()).ok_or_else(|| {
                        LoginError::Failed("Telegram named no datacenter to move to".into())
                    })?;
                    self.session
                        .set_home_dc_id(dc)
                        .await
                        .map_err(|e| LoginError::Failed(format!("session: {e}")))?;
                    self.client.invoke(&request).await.map_err(|e| failed(&e))?
                }
                Err(e) => return Err(failed(&e)),
            };
            self.sent_code(answer).await
        })
    }

    fn resend_code<'a>(
        &'a self,
        phone: &'a str,
        hash: &'a str,
    ) -> BoxFuture<'a, Result<Option<SendCodeAnswer>, LoginError>> {
        Box::pin(async move {
            // grammers 0.11 has no call for it: the raw request.
            let request = tl::functions::auth::ResendCode {
                phone_number: phone.to_string(),
                phone_code_hash: hash.to_string(),
                reason: None,
            };
            match self.client.invoke(&request).await {
                Ok(answer) => self.sent_code(answer).await.map(Some),
                Err(e) if e.is("PHONE_CODE_EXPIRED") || e.is("PHONE_CODE_HASH_EMPTY") => Ok(None),
                Err(e) => Err(failed(&e)),
            }
        })
    }

    fn sign_in<'a>(
        &'a self,
        phone: &'a str,
        hash: &'a str,
        code: &'a str,
    ) -> BoxFuture<'a, Result<SignInAnswer, LoginError>> {
        Box::pin(async move {
            let answer = self
                .client
                .invoke(&tl::functions::auth::SignIn {
                    phone_number: phone.to_string(),
                    phone_code_hash: hash.to_string(),
                    phone_code: Some(code.to_string()),
                    email_verification: None,
                })
                .await;
            match answer {
                Ok(auth @ tl::enums::auth::Authorization::Authorization(_)) => {
                    self.complete(auth).await.map(SignInAnswer::LoggedIn)
                }
                Ok(tl::enums::auth::Authorization::SignUpRequired(_)) => {
                    Ok(SignInAnswer::SignUpRequired)
                }
                Err(e) if e.is("SESSION_PASSWORD_NEEDED") => Ok(SignInAnswer::PasswordNeeded),
                Err(e) if e.is("PHONE_CODE_EXPIRED") => Ok(SignInAnswer::CodeExpired),
                Err(e) if e.is("PHONE_CODE_*") => Ok(SignInAnswer::CodeInvalid),
                Err(e) => Err(failed(&e)),
            }
        })
    }

    fn password_challenge(&self) -> BoxFuture<'_, ChallengeResult<PasswordToken>> {
        Box::pin(async move {
            let tl::enums::account::Password::Password(password) = self
                .client
                .invoke(&tl::functions::account::GetPassword {})
                .await
                .map_err(|e| failed(&e))?;
            let hint = password.hint.clone();
            Ok((PasswordToken::new(password), hint))
        })
    }

    fn check_password(
        &self,
        challenge: PasswordToken,
        password: String,
    ) -> BoxFuture<'_, Result<PasswordAnswer, LoginError>> {
        Box::pin(async move {
            match self
                .client
                .check_password(challenge, password.as_bytes())
                .await
            {
                Ok(user) => Ok(PasswordAnswer::LoggedIn(user.full_name())),
                Err(grammers_client::SignInError::InvalidPassword(_)) => Ok(PasswordAnswer::Wrong),
                Err(grammers_client::SignInError::Other(e)) => Err(failed(&e)),
                Err(grammers_client::SignInError::SignUpRequired) => {
                    Err(LoginError::SignUpRequired)
                }
                Err(
                    grammers_client::SignInError::InvalidCode
                    | grammers_client::SignInError::PasswordRequired(_),
                ) => Err(LoginError::Failed(
                    "Telegram asked for a code or a password again while checking the password"
                        .into(),
                )),
            }
        })
    }
}
