//! Whether a group message asks something, in any of the languages of `requests.txt`: a
//! question mark (Latin, Arabic, full-width, or Spanish `¿`), or a question or request word
//! from the tables of the languages in play. The tables are data (one section per language,
//! embedded in the binary) so a language is added without code. The languages in play are
//! the persona's `# Language` when it names some (the operator knows what the group speaks,
//! and a narrower set asks less often by mistake: German `was` opens no English question),
//! else every language whose script appears in the message.
//!
//! Pure and allocation-light: the tables are parsed once, on first use; a malformed line of
//! the embedded file is skipped (a unit test proves there is none). Called by
//! `group::decide` (the smart-mode prefilter and the classifier's `request_to_us`).

use std::collections::HashSet;
use std::sync::OnceLock;

/// A writing system a table is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Script {
    Latin,
    Cyrillic,
    Arabic,
    Han,
}

impl Script {
    fn parse(word: &str) -> Option<Script> {
        match word {
            "latin" => Some(Script::Latin),
            "cyrillic" => Some(Script::Cyrillic),
            "arabic" => Some(Script::Arabic),
            "han" => Some(Script::Han),
            _ => None,
        }
    }

    fn of(c: char) -> Option<Script> {
        match c as u32 {
            0x41..=0x5A | 0x61..=0x7A | 0xC0..=0x24F => Some(Script::Latin),
            0x400..=0x52F => Some(Script::Cyrillic),
            0x600..=0x6FF | 0x750..=0x77F | 0xFB50..=0xFDFF | 0xFE70..=0xFEFF => {
                Some(Script::Arabic)
            }
            0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF => Some(Script::Han),
            _ => None,
        }
    }
}

/// One language's table.
#[derive(Debug, Default)]
pub(crate) struct Table {
    pub code: String,
    pub name: String,
    scripts: Vec<Script>,
    /// Words that open a question or request.
    open: HashSet<String>,
    /// Words or phrases (as word sequences) that ask anywhere.
    any: Vec<Vec<String>>,
    /// Word endings that ask (Uzbek `-mi`).
    suffix: Vec<String>,
}

/// The embedded tables.
const TABLES: &str = include_str!("requests.txt");

/// Every table, parsed once.
pub(crate) fn tables() -> &'static [Table] {
    static PARSED: OnceLock<Vec<Table>> = OnceLock::new();
    PARSED.get_or_init(|| parse(TABLES).0)
}

/// The tables of `text` and the lines that did not parse (as `line N: why`).
fn parse(text: &str) -> (Vec<Table>, Vec<String>) {
    let mut tables: Vec<Table> = Vec::new();
    let mut bad = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(head) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let mut words = head.split_whitespace();
            let (Some(code), Some(name)) = (words.next(), words.next()) else {
                bad.push(format!("line {}: a section needs a code and a name", n + 1));
                continue;
            };
            let scripts: Option<Vec<Script>> = words.map(Script::parse).collect();
            match scripts {
                Some(scripts) if !scripts.is_empty() => tables.push(Table {
                    code: code.to_owned(),
                    name: name.to_owned(),
                    scripts,
                    ..Table::default()
                }),
                _ => bad.push(format!("line {}: unknown or missing script", n + 1)),
            }
            continue;
        }
        let Some(table) = tables.last_mut() else {
            bad.push(format!("line {}: words before any [section]", n + 1));
            continue;
        };
        let Some((kind, rest)) = line.split_once(':') else {
            bad.push(format!(
                "line {}: expected `open:`, `any:` or `suffix:`",
                n + 1
            ));
            continue;
        };
        match kind.trim() {
            "open" => table.open.extend(words(rest)),
            "any" => table
                .any
                .extend(rest.split('|').map(words).filter(|w| !w.is_empty())),
            "suffix" => table.suffix.extend(words(rest)),
            other => bad.push(format!("line {}: unknown kind `{other}`", n + 1)),
        }
    }
    (tables, bad)
}

/// Folds letters that are written several ways: case, Arabic and Persian variants of yeh,
/// kaf and alef, diacritics and tatweel, the zero-width non-joiner (Persian `می‌شه` is
/// `میشه`).
fn fold(c: char) -> Option<char> {
    match c {
        '\u{200C}' | '\u{200D}' | '\u{0640}' => None,
        '\u{064B}'..='\u{065F}' | '\u{0670}' => None,
        'ي' | 'ى' => Some('ی'),
        'ك' => Some('ک'),
        'أ' | 'إ' | 'آ' | 'ٱ' => Some('ا'),
        _ => Some(c),
    }
}

/// The words of `text`, folded and lower-cased (a word is a run of letters and digits).
fn words(text: &str) -> Vec<String> {
    let folded: String = text
        .chars()
        .filter_map(fold)
        .flat_map(char::to_lowercase)
        .collect();
    folded
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether `text` is a question or a request: a question mark, or a word of the tables of
/// `languages` (codes or names, as the persona's `# Language` gives them) or, when that is
/// empty, of the scripts the text is written in.
pub(crate) fn looks_like_request(text: &str, languages: &[String]) -> bool {
    if text.contains(['?', '？', '؟', '¿']) {
        return true;
    }
    let scripts: HashSet<Script> = text.chars().filter_map(Script::of).collect();
    let chosen = tables().iter().filter(|t| {
        if languages.is_empty() {
            t.scripts.iter().any(|s| scripts.contains(s))
        } else {
            languages.iter().any(|l| names(t, l))
        }
    });
    let sentences = sentences(text);
    let all = words(text);
    let han: String = text.chars().filter_map(fold).collect();
    chosen.into_iter().any(|t| {
        sentences
            .iter()
            .any(|s| s.first().is_some_and(|w| t.open.contains(w)))
            || t.any.iter().any(|phrase| {
                if t.scripts.contains(&Script::Han) {
                    han.contains(&phrase.concat())
                } else {
                    all.windows(phrase.len()).any(|w| w == phrase.as_slice())
                }
            })
            || t.suffix.iter().any(|s| {
                all.iter()
                    .any(|w| w.ends_with(s.as_str()) && w.chars().count() >= s.chars().count() + 3)
            })
    })
}

/// Whether `language` (a code or a name, any case) names `table`.
fn names(table: &Table, language: &str) -> bool {
    let l = language.trim();
    l.eq_ignore_ascii_case(&table.code) || l.eq_ignore_ascii_case(&table.name)
}

/// Whether `language` names one of the tables (the persona's `# Language` is checked with it).
pub(crate) fn known_language(language: &str) -> bool {
    tables().iter().any(|t| names(t, language))
}

/// The languages with tables, as `code (Name)`, for error messages and docs.
pub(crate) fn known_languages() -> String {
    tables()
        .iter()
        .map(|t| format!("{} ({})", t.code, t.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The words of each sentence (split at `.`, `!`, `;`, line breaks and their CJK and Arabic
/// forms), so an opening word counts after a greeting ("Hi all. How do I …").
fn sentences(text: &str) -> Vec<Vec<String>> {
    text.split(['.', '!', ';', '\n', '。', '！', '؛', '…'])
        .map(words)
        .filter(|w| !w.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_tables_parse_and_cover_the_listed_languages() {
        let (tables, bad) = parse(TABLES);
        assert!(bad.is_empty(), "{bad:?}");
        let codes: Vec<&str> = tables.iter().map(|t| t.code.as_str()).collect();
        assert_eq!(
            codes,
            ["en", "ru", "fa", "ar", "uz", "es", "de", "fr", "zh"],
            "the languages the docs list"
        );
        let en = &tables[0];
        assert!(en.open.contains("could") && en.open.contains("anyone"));
    }

    #[test]
    fn a_bad_table_line_is_named() {
        let (_, bad) = parse("[xx]\nopen: a\n[en English klingon]\n[fr French latin]\nsome: x");
        assert_eq!(bad.len(), 4, "{bad:?}");
        assert!(bad[0].starts_with("line 1:"), "{bad:?}");
    }

    /// For each language: requests without a question mark are candidates, plain statements
    /// are not.
    #[test]
    fn requests_without_a_question_mark_in_every_listed_language() {
        let cases: [(&str, &[&str], &[&str]); 9] = [
            (
                "en",
                &[
                    "Anyone know a good Rust book",
                    "Hi all. How do I install it",
                    "please send me the link",
                ],
                &["nice weather today", "I installed ubuntu yesterday"],
            ),
            (
                "ru",
                &[
                    "Подскажите, как установить питон",
                    "кто-нибудь знает хороший курс",
                    "Есть ли тут админ",
                ],
                &["Сегодня хорошая погода", "Я вчера установил убунту"],
            ),
            (
                "fa",
                &[
                    "دوستان لینوکس لازمه یا با ویندوز هم می‌شه لطفا راهنمایی کنید",
                    "سلام\nکسی میدونه این ارور چیه",
                    "یکی پین کنه دقیقا چه چیزایی رو باید دانلود کنیم",
                ],
                &["امروز هوا خیلی خوبه", "من اوبونتو رو دیروز نصب کردم"],
            ),
            (
                "ar",
                &[
                    "هل يعرف أحد كتابا جيدا عن بايثون",
                    "من فضلك ساعدوني في تثبيت البرنامج",
                    "كيف أثبت المكتبة",
                ],
                &["الجو جميل اليوم", "لقد قمت بتثبيت البرنامج أمس"],
            ),
            (
                "uz",
                &[
                    "Python o'rganish uchun kitob bormi",
                    "iltimos yordam bering",
                    "Bu xatoni kim biladi",
                    "Бу ерда админ борми",
                ],
                &["Bugun havo yaxshi", "Men dasturni kecha o'rnatdim"],
            ),
            (
                "es",
                &[
                    "Alguien sabe cómo instalar Python",
                    "por favor ayúdenme con este error",
                    "Cómo hago para instalarlo",
                ],
                &["Hoy hace buen tiempo", "Ya instalé el programa ayer"],
            ),
            (
                "de",
                &[
                    "Kann mir jemand bei Python helfen",
                    "Weiß jemand, wie das geht",
                    "bitte um Hilfe beim Installieren",
                ],
                &[
                    "Heute ist schönes Wetter",
                    "Ich habe das Programm gestern installiert",
                ],
            ),
            (
                "fr",
                &[
                    "Quelqu'un sait comment installer Python",
                    "aidez-moi svp avec cette erreur",
                    "Comment faire pour lancer le script",
                ],
                &[
                    "Il fait beau aujourd'hui",
                    "J'ai installé le programme hier",
                ],
            ),
            (
                "zh",
                &[
                    "有人知道怎么安装Python",
                    "请帮我看看这个错误",
                    "这个库好用吗",
                ],
                &["今天天气很好", "我已经安装了程序"],
            ),
        ];
        for (lang, requests, statements) in cases {
            for r in requests {
                assert!(looks_like_request(r, &[]), "{lang}: not a candidate: {r}");
            }
            for s in statements {
                assert!(
                    !looks_like_request(s, &[]),
                    "{lang}: a statement taken as a request: {s}"
                );
            }
        }
    }

    #[test]
    fn question_marks_of_every_script_still_count() {
        for q in ["is this right?", "این چیه؟", "这是什么？", "¿Funciona"] {
            assert!(looks_like_request(q, &[]), "{q}");
        }
    }

    #[test]
    fn the_personas_language_narrows_the_tables() {
        // German `was` opens a question; in an English group it is the past of "is".
        assert!(
            looks_like_request("Was great fun yesterday", &[]),
            "by script"
        );
        let en = ["en".to_string()];
        assert!(!looks_like_request("Was great fun yesterday", &en));
        assert!(looks_like_request("anyone know a good book", &en));
        let persian = ["Persian".to_string()];
        assert!(!looks_like_request("anyone know a good book", &persian));
        assert!(looks_like_request("کسی میدونه", &persian));
        assert!(known_language("Persian") && known_language("fa") && known_language("ZH"));
        assert!(!known_language("Klingon"));
        assert!(known_languages().contains("uz (Uzbek)"));
    }
}
