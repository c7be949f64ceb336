//! HTML to readable text, by hand (no HTML crate in the tree, and a page only needs its
//! words): the elements nobody reads (`script`, `style`, `nav`, `head`, `svg`, `template`,
//! `noscript`, `iframe`, `form`'s `select`) are dropped whole, tags become line breaks where
//! they end a block, comments go, the common entities are decoded and the whitespace is
//! collapsed. The page's `<title>` leads. Linear in the input (which the fetcher has already
//! capped); never fails. Used by `http` for `text/html` and `application/xhtml+xml`.

/// Elements dropped with everything inside them.
const DROPPED: [&str; 10] = [
    "script", "style", "nav", "head", "svg", "template", "noscript", "iframe", "select", "object",
];

/// Elements that end a line.
const BLOCKS: [&str; 28] = [
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "table",
    "section",
    "article",
    "header",
    "footer",
    "main",
    "aside",
    "blockquote",
    "pre",
    "hr",
    "dd",
    "dt",
    "dl",
    "figcaption",
    "form",
];

/// The readable text of an HTML page.
pub fn to_text(html: &str) -> String {
    // ASCII lower-casing keeps byte offsets, so tag names and ends are found in `lower`.
    let lower = html.to_ascii_lowercase();
    let mut out = String::with_capacity(html.len() / 2);
    if let Some(title) = element_text(html, &lower, "title") {
        let title = collapse(&decode(title));
        if !title.is_empty() {
            out.push_str("Title: ");
            out.push_str(&title);
            out.push_str("\n\n");
        }
    }
    let bytes = html.as_bytes();
    let mut i = 0;
    let mut text_from = 0;
    while i < bytes.len() {
        if bytes[i] != b'<' {
            i += 1;
            continue;
        }
        push_text(&mut out, &html[text_from..i]);
        let rest = &lower[i..];
        if rest.starts_with("<!--") {
            i = rest.find("-->").map_or(bytes.len(), |e| i + e + 3);
            text_from = i;
            continue;
        }
        let end = tag_end(bytes, i);
        let name: String = rest[1..]
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        let closing = rest.starts_with("</");
        i = end;
        if !closing && DROPPED.contains(&name.as_str()) {
            let close = format!("</{name}");
            i = lower[i..]
                .find(&close)
                .map_or(bytes.len(), |at| tag_end(bytes, i + at));
        } else if name == "li" {
            if !closing {
                out.push_str("\n- ");
            }
        } else if BLOCKS.contains(&name.as_str()) {
            out.push('\n');
        } else if name == "td" || name == "th" {
            out.push(' ');
        }
        text_from = i;
    }
    if text_from < html.len() {
        push_text(&mut out, &html[text_from..]);
    }
    tidy(&out)
}

/// Text between tags: decoded, its line breaks as spaces (only tags break lines in HTML).
fn push_text(out: &mut String, raw: &str) {
    out.extend(
        decode(raw)
            .chars()
            .map(|c| if c == '\n' || c == '\r' { ' ' } else { c }),
    );
}

/// The index just past the `>` closing the tag opened at `from` (quotes respected).
fn tag_end(bytes: &[u8], from: usize) -> usize {
    let mut quote = None;
    for (k, &b) in bytes.iter().enumerate().skip(from + 1) {
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(b),
            (None, b'>') => return k + 1,
            _ => {}
        }
    }
    bytes.len()
}

/// The raw text inside the first `<name …>…</name>`.
fn element_text<'a>(html: &'a str, lower: &str, name: &str) -> Option<&'a str> {
    let open = lower.find(&format!("<{name}"))?;
    let start = tag_end(html.as_bytes(), open);
    let len = lower.get(start..)?.find(&format!("</{name}"))?;
    html.get(start..start + len)
}

/// Decodes the common character references; unknown ones stay as written.
fn decode(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        // A reference is short: its `;` within the first 12 bytes (bytes: never a char cut).
        let Some(semi) = rest.bytes().take(12).position(|b| b == b';') else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let name = &rest[1..semi];
        let decoded = match name {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            "nbsp" => Some(' '),
            "mdash" => Some('—'),
            "ndash" => Some('–'),
            "hellip" => Some('…'),
            "copy" => Some('©'),
            "rsquo" => Some('’'),
            "lsquo" => Some('‘'),
            "ldquo" => Some('“'),
            "rdquo" => Some('”'),
            _ => name
                .strip_prefix("#x")
                .or_else(|| name.strip_prefix("#X"))
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| name.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// One line's runs of whitespace as single spaces, trimmed.
fn collapse(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Lines collapsed, at most one blank line in a row, none at the ends.
pub fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = false;
    for line in text.lines().map(collapse) {
        if line.is_empty() || line == "-" {
            blank = !out.is_empty();
            continue;
        }
        if blank {
            out.push('\n');
            blank = false;
        }
        out.push_str(&line);
        out.push('\n');
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_styles_and_navigation_go_and_the_words_stay() {
        let page = r#"<!DOCTYPE html><html><head><title>Lemons &amp; limes</title>
            <style>body { color: red }</style><script>var x = "</p>";</script></head>
            <body><nav><a href="/">Home</a> | <a href="/x">Menu</a></nav>
            <!-- a comment <p>hidden</p> -->
            <h1>Lemons</h1><p>A lemon is&nbsp;a <b>yellow</b> citrus fruit &#8212; sour.</p>
            <ul><li>Vitamin C</li><li>Acid</li></ul>
            <script type="text/javascript">alert('no')</script>
            <p data-x='a > b'>The end &#x2713;</p></body></html>"#;
        let text = to_text(page);
        assert_eq!(
            text,
            "Title: Lemons & limes\n\nLemons\n\nA lemon is a yellow citrus fruit — sour.\n\n- Vitamin C\n- Acid\n\nThe end ✓"
        );
        for gone in ["color", "alert", "Menu", "hidden", "var x", "<"] {
            assert!(!text.contains(gone), "{gone} kept: {text}");
        }
    }

    #[test]
    fn broken_markup_never_panics_and_keeps_text() {
        for page in [
            "<",
            "<p",
            "a & b",
            "&#xFFFFFFFF; &#99999999999;",
            "<script>",
            "é<b>ü",
            "&",
        ] {
            let _ = to_text(page);
        }
        assert_eq!(to_text("a & b <i>c"), "a & b c");
        assert_eq!(to_text("<p>unclosed <script>x"), "unclosed");
    }
}
