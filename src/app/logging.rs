//! Logging: one tracing layer that writes each event as one line to stderr, as text, as a
//! JSON object, or for the journal (`<N>` priority prefixes, no timestamps: journald adds
//! them). Every line carries a stable `event` name: the event's own `event` field when the
//! code names it, otherwise a slug of the message's leading words. Field names are normalised
//! so one concept has one name (`conversation = "A/42"` becomes `agent` and `chat`; a field
//! called `message` that is not the log text becomes `message_id`), and a key never repeats.
//! The level comes from `-v`/`-q` unless `PERSONAD_LOG` holds a filter directive; Telegram
//! library and HTTP client noise stays at warn unless `-vv`. Called once, by the binary.

use std::fmt::Write as _;
use std::io::Write as _;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// Output format of log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines with a UTC timestamp.
    Text,
    /// One JSON object per line (`ts`, `level`, `event`, `msg`, then the fields).
    Json,
    /// For systemd's journal: `<priority>` prefixes, no timestamp. Chosen automatically when
    /// stderr is connected to the journal (`JOURNAL_STREAM`).
    Journald,
}

/// Crates whose info/debug output is noise for an operator.
const NOISY: &[&str] = &[
    "grammers_client",
    "grammers_mtsender",
    "grammers_mtproto",
    "grammers_session",
    "grammers_crypto",
    "grammers_tl_types",
    "reqwest",
    "hyper",
    "hyper_util",
    "rustls",
    "h2",
    "notify",
];

/// Maps the `-v`/`-q` balance to a level (0 = info).
pub(crate) fn level_for(verbosity: i8) -> &'static str {
    match verbosity {
        i8::MIN..=-2 => "error",
        -1 => "warn",
        0 => "info",
        1 => "debug",
        _ => "trace",
    }
}

/// The filter directive for a verbosity: the level, with noisy dependencies capped at warn
/// below `-vv`.
pub(crate) fn directive_for(verbosity: i8) -> String {
    let level = level_for(verbosity);
    let mut d = level.to_string();
    if (0..2).contains(&verbosity) {
        for c in NOISY {
            d.push_str(&format!(",{c}=warn"));
        }
    }
    d
}

/// The format to use: the one asked for, else journald when stderr is the journal.
pub fn resolve_format(asked: Option<LogFormat>) -> LogFormat {
    asked.unwrap_or_else(|| {
        if stderr_is_journal() {
            LogFormat::Journald
        } else {
            LogFormat::Text
        }
    })
}

/// `JOURNAL_STREAM` holds `device:inode` of the journal stream systemd connected; it names
/// stderr only if they match (a child of the service may inherit the variable, not the fd).
fn stderr_is_journal() -> bool {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        use std::os::unix::fs::MetadataExt;
        let Ok(stream) = std::env::var("JOURNAL_STREAM") else {
            return false;
        };
        let Ok(fd) = std::io::stderr().as_fd().try_clone_to_owned() else {
            return false;
        };
        let Ok(meta) = std::fs::File::from(fd).metadata() else {
            return false;
        };
        stream == format!("{}:{}", meta.dev(), meta.ino())
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// Installs the global subscriber. Returns false if one was already installed.
pub fn init(format: LogFormat, verbosity: i8) -> bool {
    let filter = std::env::var("PERSONAD_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| EnvFilter::new(directive_for(verbosity)));
    tracing_subscriber::registry()
        .with(filter)
        .with(LineLayer { format })
        .try_init()
        .is_ok()
}

/// The layer that renders events as lines.
pub(crate) struct LineLayer {
    pub format: LogFormat,
}

impl<S: Subscriber> Layer<S> for LineLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let line = render(self.format, event, jiff::Timestamp::now());
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(line.as_bytes());
    }
}

/// Collects an event's fields in order.
#[derive(Default)]
struct Fields {
    list: Vec<(String, Value)>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.list
            .push((field.name().to_string(), Value::from(format!("{value:?}"))));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.list
            .push((field.name().to_string(), Value::from(value)));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.list
            .push((field.name().to_string(), Value::from(value)));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.list
            .push((field.name().to_string(), Value::from(value)));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.list
            .push((field.name().to_string(), Value::from(value)));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.list
            .push((field.name().to_string(), Value::from(value)));
    }
}

/// A log line's parts after normalisation.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub event: String,
    pub msg: String,
    pub fields: Vec<(String, Value)>,
}

/// Normalises raw fields (in recording order) into a line: the last `message` is the text,
/// `event` names the line, and every other key is renamed to its one name and made unique.
pub(crate) fn normalize(raw: Vec<(String, Value)>) -> Line {
    let msg_at = raw.iter().rposition(|(k, _)| k == "message");
    let mut msg = String::new();
    let mut event = None;
    let mut fields: Vec<(String, Value)> = Vec::new();
    let push = |fields: &mut Vec<(String, Value)>, key: &str, value: Value| {
        let mut name = key.to_string();
        let mut n = 2;
        while fields.iter().any(|(k, _)| *k == name)
            || matches!(name.as_str(), "ts" | "level" | "event" | "msg")
        {
            name = format!("{key}_{n}");
            n += 1;
        }
        fields.push((name, value));
    };
    for (i, (key, value)) in raw.into_iter().enumerate() {
        if Some(i) == msg_at {
            msg = value.as_str().map(str::to_string).unwrap_or_default();
            continue;
        }
        match key.as_str() {
            "event" if event.is_none() => {
                event = value.as_str().map(str::to_string);
            }
            "conversation" => match value.as_str().and_then(|s| s.rsplit_once('/')) {
                Some((agent, chat)) => {
                    push(&mut fields, "agent", Value::from(agent));
                    push(&mut fields, "chat", chat_value(chat));
                }
                None => push(&mut fields, "chat", value),
            },
            "chat" | "chat_id" => {
                let v = value.as_str().map(chat_value).unwrap_or(value);
                push(&mut fields, "chat", v);
            }
            "message" => push(&mut fields, "message_id", value),
            "task_id" => push(&mut fields, "task", value),
            "agent_name" => push(&mut fields, "agent", value),
            other => push(&mut fields, other, value),
        }
    }
    let event = event.unwrap_or_else(|| slug(&msg));
    Line { event, msg, fields }
}

fn chat_value(s: &str) -> Value {
    s.parse::<i64>()
        .map_or_else(|_| Value::from(s), Value::from)
}

/// A stable event name from a message: its leading words (up to the first `:`, `;`, `(`,
/// `,` or `.`, at most six), lower case, joined by `_`.
pub(crate) fn slug(msg: &str) -> String {
    let head = msg.split([':', ';', '(', ',', '.']).next().unwrap_or("");
    let words: Vec<String> = head
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(6)
        .map(str::to_lowercase)
        .collect();
    if words.is_empty() {
        "log".to_string()
    } else {
        words.join("_")
    }
}

fn render(format: LogFormat, event: &Event<'_>, now: jiff::Timestamp) -> String {
    let mut raw = Fields::default();
    event.record(&mut raw);
    let line = normalize(raw.list);
    let level = *event.metadata().level();
    render_line(format, level, &line, now)
}

/// One finished line (with its newline) in the given format.
pub(crate) fn render_line(
    format: LogFormat,
    level: Level,
    line: &Line,
    now: jiff::Timestamp,
) -> String {
    match format {
        LogFormat::Json => {
            let mut obj = Map::new();
            obj.insert(
                "ts".into(),
                Value::from(now.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()),
            );
            obj.insert("level".into(), Value::from(level.as_str().to_lowercase()));
            obj.insert("event".into(), Value::from(line.event.clone()));
            obj.insert("msg".into(), Value::from(line.msg.clone()));
            for (k, v) in &line.fields {
                obj.insert(k.clone(), v.clone());
            }
            let mut s = Value::Object(obj).to_string();
            s.push('\n');
            s
        }
        LogFormat::Text => {
            let mut s = format!(
                "{} {:>5} {}",
                now.strftime("%Y-%m-%dT%H:%M:%S%.3fZ"),
                level.as_str(),
                inert(&line.msg)
            );
            push_fields(&mut s, line);
            s.push('\n');
            s
        }
        LogFormat::Journald => {
            let prio = match level {
                Level::ERROR => 3,
                Level::WARN => 4,
                Level::INFO => 6,
                _ => 7,
            };
            let mut s = format!("<{prio}>{}", inert(&line.msg));
            push_fields(&mut s, line);
            // The journal splits on newlines: keep one entry per event.
            let mut s = s.replace('\n', " ");
            s.push('\n');
            s
        }
    }
}

/// Text made inert for a terminal or the journal: control characters other than newline and
/// tab (an escape sequence from a file name or a message, say) are written as `\u{1b}`, so
/// a log line never carries colour codes or cursor movements.
pub fn inert(text: &str) -> std::borrow::Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

fn push_fields(s: &mut String, line: &Line) {
    let _ = write!(s, " event={}", inert(&line.event));
    for (k, v) in &line.fields {
        let k = inert(k);
        let v = match v {
            Value::String(text) => Value::String(inert(text).into_owned()),
            other => other.clone(),
        };
        match &v {
            Value::String(text) if !text.contains([' ', '"', '=']) && !text.is_empty() => {
                let _ = write!(s, " {k}={text}");
            }
            // Human formats: the text as written (quotes inside are not escaped).
            Value::String(text) => {
                let _ = write!(s, " {k}=\"{text}\"");
            }
            other => {
                let _ = write!(s, " {k}={other}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_send_line_gets_one_message_key_and_split_conversation() {
        let raw = vec![
            ("conversation".to_string(), Value::from("Wren/42")),
            ("message".to_string(), Value::from("7")),
            ("message".to_string(), Value::from("sent a message")),
        ];
        let line = normalize(raw);
        assert_eq!(line.msg, "sent a message");
        assert_eq!(line.event, "sent_a_message");
        assert_eq!(
            line.fields,
            vec![
                ("agent".to_string(), Value::from("Wren")),
                ("chat".to_string(), Value::from(42)),
                ("message_id".to_string(), Value::from("7")),
            ]
        );
        let json = render_line(
            LogFormat::Json,
            Level::INFO,
            &line,
            jiff::Timestamp::UNIX_EPOCH,
        );
        let v: Value = serde_json::from_str(&json).unwrap_or_default();
        assert_eq!(v["agent"], "Wren");
        assert_eq!(v["chat"], 42);
    }

    #[test]
    fn explicit_event_names_win_and_reserved_keys_are_not_repeated() {
        let raw = vec![
            ("event".to_string(), Value::from("ready")),
            ("level".to_string(), Value::from("x")),
            ("message".to_string(), Value::from("daemon ready: 2 agents")),
        ];
        let line = normalize(raw);
        assert_eq!(line.event, "ready");
        assert_eq!(line.fields[0].0, "level_2");
        assert_eq!(
            slug("Telegram asked us to wait: conversation parked"),
            "telegram_asked_us_to_wait"
        );
        assert_eq!(slug(""), "log");
    }

    #[test]
    fn journald_lines_carry_priorities_and_stay_on_one_line() {
        let line = normalize(vec![("message".to_string(), Value::from("a\nb"))]);
        let s = render_line(
            LogFormat::Journald,
            Level::WARN,
            &line,
            jiff::Timestamp::UNIX_EPOCH,
        );
        assert_eq!(s, "<4>a b event=a_b\n");
    }

    #[test]
    fn text_lines_carry_no_escape_sequences() {
        let line = normalize(vec![
            ("file".to_string(), Value::from("\u{1b}[31mred.json")),
            ("message".to_string(), Value::from("bad \u{1b}[0m file")),
        ]);
        for format in [LogFormat::Text, LogFormat::Journald] {
            let s = render_line(format, Level::ERROR, &line, jiff::Timestamp::UNIX_EPOCH);
            assert!(!s.contains('\u{1b}'), "{s}");
            assert!(s.contains("\\u{1b}[31mred.json"), "{s}");
        }
    }

    #[test]
    fn verbosity_keeps_library_noise_at_warn_below_vv() {
        assert!(directive_for(1).contains("grammers_mtsender=warn"));
        assert!(directive_for(1).starts_with("debug"));
        assert_eq!(directive_for(2), "trace");
        assert_eq!(directive_for(-1), "warn");
    }
}
