//! A small streaming reader for inbound ISO 20022 files (SPEC B5), on quick-xml's pull parser:
//! never a DOM, so a statement of 50,000 entries is read with memory bounded by one element's
//! text and the current element path.
//!
//! [`walk`] calls a [`Visitor`] with each element's path (local names joined by `/` from the
//! root, prefixes dropped: `Document/BkToCstmrStmt/Stmt/Ntry/Amt`) when it opens, and with its
//! text (entities resolved, trimmed) and its `Ccy` attribute when it closes. Errors from the XML
//! itself or from the visitor come back as [`XmlError`] with the element path and the line,
//! which `formats::answer_error` turns into the inbound file's error.

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// Elements nested deeper than this are refused: no ISO 20022 message comes near it, and a
/// hostile file must not grow the path without bound.
const MAX_DEPTH: usize = 64;
/// The longest text one element may carry (`Max500Text` and amounts are far below it).
const MAX_TEXT: usize = 64 * 1024;

/// Why a file could not be read: what, at which element, on which line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XmlError {
    pub path: String,
    pub line: usize,
    pub message: String,
}

/// What a format's reader does with the elements as they come.
pub trait Visitor {
    /// `path` has just opened.
    fn open(&mut self, path: &str) -> Result<(), String>;
    /// `path` closes with its `text` (trimmed; empty for elements with children) and its `Ccy`
    /// attribute, if any.
    fn close(&mut self, path: &str, text: &str, currency: Option<&str>) -> Result<(), String>;
}

/// The namespace of the root element (`xmlns`, or `xmlns:p` for a root written `p:Document`),
/// read from the first start tag; None if the input is not XML with a namespaced root.
pub fn root_namespace(bytes: &[u8]) -> Option<String> {
    let mut reader = Reader::from_reader(bytes);
    loop {
        match reader.read_event() {
            Ok(Event::Start(start) | Event::Empty(start)) => return namespace_of(&start),
            Ok(Event::Decl(_) | Event::Comment(_) | Event::PI(_) | Event::DocType(_) | Event::Text(_)) => continue,
            _ => return None,
        }
    }
}

fn namespace_of(start: &BytesStart<'_>) -> Option<String> {
    let name = start.name();
    let wanted = match name.prefix() {
        Some(prefix) => [b"xmlns:".as_slice(), prefix.as_ref()].concat(),
        None => b"xmlns".to_vec(),
    };
    let attribute = start.attributes().flatten().find(|a| a.key.as_ref() == wanted.as_slice())?;
    attribute.unescape_value().ok().map(|v| v.trim().to_owned())
}

/// Reads the whole document, calling `visitor` for every element.
pub fn walk(bytes: &[u8], visitor: &mut impl Visitor) -> Result<(), XmlError> {
    let mut walker = Walker { path: String::new(), starts: Vec::new(), currencies: Vec::new(), text: String::new() };
    let mut reader = Reader::from_reader(bytes);
    loop {
        let event = reader.read_event().map_err(|e| walker.error(bytes, &reader, format!("not well-formed XML: {e}")))?;
        let step = match event {
            Event::Start(start) => walker.open(&start, visitor),
            Event::Empty(start) => walker.open(&start, visitor).and_then(|()| walker.close(visitor)),
            Event::End(_) => walker.close(visitor),
            Event::Text(text) => match text.xml_content() {
                Ok(text) => walker.push_text(&text),
                Err(e) => Err(format!("bad text: {e}")),
            },
            Event::CData(data) => match std::str::from_utf8(&data) {
                Ok(text) => walker.push_text(text),
                Err(_) => Err("CDATA that is not UTF-8".to_owned()),
            },
            Event::GeneralRef(reference) => walker.push_reference(&reference),
            Event::Eof => break,
            Event::Decl(_) | Event::Comment(_) | Event::PI(_) | Event::DocType(_) => Ok(()),
        };
        step.map_err(|message| walker.error(bytes, &reader, message))?;
    }
    if !walker.starts.is_empty() {
        return Err(walker.error(bytes, &reader, "the document ends before its elements close".to_owned()));
    }
    Ok(())
}

struct Walker {
    path: String,
    /// Where each open element's name starts in `path`.
    starts: Vec<usize>,
    currencies: Vec<Option<String>>,
    text: String,
}

impl Walker {
    fn open(&mut self, start: &BytesStart<'_>, visitor: &mut impl Visitor) -> Result<(), String> {
        if self.starts.len() >= MAX_DEPTH {
            return Err(format!("elements nest deeper than {MAX_DEPTH}"));
        }
        let local = start.local_name();
        let name = std::str::from_utf8(local.as_ref()).map_err(|_| "an element name that is not UTF-8".to_owned())?;
        self.starts.push(self.path.len());
        if !self.path.is_empty() {
            self.path.push('/');
        }
        self.path.push_str(name);
        let currency = start.attributes().flatten().find(|a| a.key.local_name().as_ref() == b"Ccy");
        self.currencies.push(currency.and_then(|a| a.unescape_value().ok().map(|v| v.into_owned())));
        self.text.clear();
        visitor.open(&self.path)
    }

    fn close(&mut self, visitor: &mut impl Visitor) -> Result<(), String> {
        let Some(start) = self.starts.pop() else { return Err("a closing tag without its opening tag".to_owned()) };
        let currency = self.currencies.pop().flatten();
        let result = visitor.close(&self.path, self.text.trim(), currency.as_deref());
        self.text.clear();
        if result.is_ok() {
            self.path.truncate(start);
        }
        result
    }

    fn push_text(&mut self, text: &str) -> Result<(), String> {
        if self.text.len() + text.len() > MAX_TEXT {
            return Err(format!("an element carries more than {MAX_TEXT} bytes of text"));
        }
        self.text.push_str(text);
        Ok(())
    }

    fn push_reference(&mut self, reference: &quick_xml::events::BytesRef<'_>) -> Result<(), String> {
        if let Some(c) = reference.resolve_char_ref().map_err(|e| format!("bad character reference: {e}"))? {
            return self.push_text(c.encode_utf8(&mut [0; 4]));
        }
        let name = reference.decode().map_err(|e| format!("bad entity: {e}"))?;
        match quick_xml::escape::resolve_predefined_entity(&name) {
            Some(text) => self.push_text(text),
            None => Err(format!("unknown entity &{name};")),
        }
    }

    fn error(&self, bytes: &[u8], reader: &Reader<&[u8]>, message: String) -> XmlError {
        let at = usize::try_from(reader.buffer_position()).unwrap_or(usize::MAX).min(bytes.len());
        let line = 1 + bytes[..at].iter().filter(|b| **b == b'\n').count();
        XmlError { path: self.path.clone(), line, message }
    }
}

/// A decimal amount of `currency` (an ISO 4217 code) in minor units: digits, at most one `.`,
/// no sign, no more decimals than the currency has.
pub fn minor_units(text: &str, currency: &str) -> Result<(i64, crate::domain::money::Currency), String> {
    let currency =
        crate::domain::money::Currency::parse("Ccy", currency).map_err(|_| format!("{currency:?} is not a currency Payrail knows"))?;
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) || (text.contains('.') && fraction.is_empty()) {
        return Err(format!("{text:?} is not an amount (digits and at most one '.')"));
    }
    let exponent = usize::from(currency.exponent());
    let fraction = fraction.trim_end_matches('0');
    if fraction.len() > exponent {
        return Err(format!("{text} has more decimals than {} has ({exponent})", currency.code()));
    }
    let scaled = format!("{whole}{fraction:0<exponent$}");
    let minor = scaled.trim_start_matches('0');
    if minor.len() > 18 {
        return Err(format!("{text} is too large an amount"));
    }
    Ok((if minor.is_empty() { 0 } else { minor.parse().map_err(|_| format!("{text} is too large an amount"))? }, currency))
}

/// An ISO date (`YYYY-MM-DD`), or the date of an ISO date-time, checked as a calendar date.
pub fn iso_date(text: &str) -> Result<String, String> {
    let date = text.get(..10).ok_or_else(|| format!("{text:?} is not a date"))?;
    let format = time::macros::format_description!("[year]-[month]-[day]");
    time::Date::parse(date, format).map_err(|_| format!("{text:?} is not a date"))?;
    if text.len() > 10 && !text[10..].starts_with('T') {
        return Err(format!("{text:?} is not a date"));
    }
    Ok(date.to_owned())
}

/// The clock time (`HH:MM:SS`) of an ISO date-time as written, whatever its offset or
/// fraction: `2026-07-02T23:00:00.5+02:00` is `23:00:00`; `None` for a date alone.
pub fn iso_time(text: &str) -> Result<Option<String>, String> {
    let Some((_, rest)) = text.split_once('T') else { return Ok(None) };
    match rest.get(..8).filter(|clock| crate::base::time::is_clock_time(clock)) {
        Some(clock) => Ok(Some(clock.to_owned())),
        None => Err(format!("{text:?} is not a date-time")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Record(Vec<String>);

    impl Visitor for Record {
        fn open(&mut self, path: &str) -> Result<(), String> {
            self.0.push(format!("+{path}"));
            Ok(())
        }
        fn close(&mut self, path: &str, text: &str, currency: Option<&str>) -> Result<(), String> {
            self.0.push(format!("-{path}={text}{}", currency.map(|c| format!(" {c}")).unwrap_or_default()));
            if text == "bad" { Err("refused".into()) } else { Ok(()) }
        }
    }

    #[test]
    fn b5_paths_text_entities_and_currencies_stream_by() {
        let xml = br#"<?xml version="1.0"?><p:Document xmlns:p="urn:x"><p:A><B Ccy="EUR"> 1.50 </B><C>a &amp; b&#33;<![CDATA[<c>]]></C><D/></p:A></p:Document>"#;
        let mut seen = Record::default();
        walk(xml, &mut seen).unwrap();
        assert_eq!(
            seen.0,
            [
                "+Document",
                "+Document/A",
                "+Document/A/B",
                "-Document/A/B=1.50 EUR",
                "+Document/A/C",
                "-Document/A/C=a & b!<c>",
                "+Document/A/D",
                "-Document/A/D=",
                "-Document/A=",
                "-Document="
            ]
        );
        assert_eq!(root_namespace(xml).as_deref(), Some("urn:x"));
    }

    #[test]
    fn b5_errors_name_the_element_and_line() {
        let err = walk(b"<A>\n<B>bad</B></A>", &mut Record::default()).unwrap_err();
        assert_eq!((err.path.as_str(), err.line, err.message.as_str()), ("A/B", 2, "refused"));
        assert!(walk(b"<A><B></A>", &mut Record::default()).is_err());
        assert!(walk(b"<A>", &mut Record::default()).unwrap_err().message.contains("ends before"));
        assert!(walk(b"<A>&nope;</A>", &mut Record::default()).is_err());
        let deep = "<A>".repeat(100);
        assert!(walk(deep.as_bytes(), &mut Record::default()).unwrap_err().message.contains("deeper"));
    }

    #[test]
    fn b5_amounts_keep_the_currency_exponent() {
        assert_eq!(minor_units("125.5", "USD").unwrap().0, 12_550);
        assert_eq!(minor_units("125.50000", "USD").unwrap().0, 12_550, "trailing zeros are not decimals");
        assert_eq!(minor_units("0", "JPY").unwrap().0, 0);
        assert_eq!(minor_units("1.234", "BHD").unwrap().0, 1_234);
        assert!(minor_units("1.234", "USD").unwrap_err().contains("more decimals than USD"));
        assert!(minor_units("1.5", "JPY").is_err());
        for bad in ["", ".5", "1.", "-1", "1,5", "1e3", "1.2.3", "99999999999999999999"] {
            assert!(minor_units(bad, "USD").is_err(), "{bad:?}");
        }
        assert!(minor_units("1", "XYZ").is_err());
        assert_eq!(iso_date("2026-07-02T10:00:00+02:00").unwrap(), "2026-07-02");
        assert!(iso_date("2026-02-30").is_err() && iso_date("2026-07-02X").is_err() && iso_date("20").is_err());
    }
}
