use crate::app::ops::controls::commands::{Op, parse_command, parse_duration};

#[test]
fn commands_parse_with_chat_selectors_and_durations() {
    assert_eq!(parse_command("hello"), None);
    assert_eq!(parse_command("/shrug"), None);
    assert_eq!(parse_command("/status"), Some(Ok(Op::Status)));
    assert_eq!(
        parse_command("/pause all 2h"),
        Some(Ok(Op::Pause {
            chat: None,
            secs: Some(7200)
        }))
    );
    assert_eq!(
        parse_command("/pause Book club 30m"),
        Some(Ok(Op::Pause {
            chat: Some("Book club".into()),
            secs: Some(1800)
        }))
    );
    assert_eq!(
        parse_command("/resume @alice"),
        Some(Ok(Op::Resume {
            chat: Some("@alice".into())
        }))
    );
    assert!(matches!(parse_command("/forget"), Some(Err(_))));
    assert_eq!(
        parse_command("/memory @alice"),
        Some(Ok(Op::Memory {
            who: Some("@alice".into())
        }))
    );
    assert_eq!(parse_command("/memory"), Some(Ok(Op::Memory { who: None })));
    assert_eq!(
        parse_command("/forget-fact fact-3f2a"),
        Some(Ok(Op::ForgetFact {
            id: "fact-3f2a".into()
        }))
    );
    assert!(matches!(parse_command("/forget-fact"), Some(Err(_))));
    assert_eq!(
        parse_command("/mode Book club smart"),
        Some(Ok(Op::Mode {
            chat: "Book club".into(),
            mode: "smart".into()
        }))
    );
    assert_eq!(parse_duration("1d"), Some(86_400));
    assert_eq!(parse_duration("0"), None);
    assert_eq!(parse_duration("2 weeks"), None);
}
