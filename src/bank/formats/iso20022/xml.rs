//! A small streaming XML writer: elements are opened, filled and closed in order straight into
//! a buffered `std::io::Write`, so a file of any size is never held in memory. Every text value
//! and attribute is escaped here (`&`, `<`, `>`, `"`, `'`); the characters themselves were
//! checked before (`text.rs`), so this layer never has to drop or replace one.

use std::io::{self, BufWriter, Write};

/// Indentation per nesting level: files are read by people during incidents, so they are
/// indented (a few percent of size; banks ignore the whitespace between elements).
const INDENT: &str = "  ";

pub struct XmlWriter<W: Write> {
    out: BufWriter<W>,
    depth: usize,
}

impl<W: Write> XmlWriter<W> {
    /// Starts a document with its UTF-8 declaration.
    pub fn new(out: W) -> io::Result<Self> {
        let mut out = BufWriter::with_capacity(64 * 1024, out);
        out.write_all(b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")?;
        Ok(XmlWriter { out, depth: 0 })
    }

    /// `<tag attr="value"...>` on its own line; children follow until [`XmlWriter::close`].
    pub fn open_with(&mut self, tag: &str, attributes: &[(&str, &str)]) -> io::Result<()> {
        self.indent()?;
        self.start_tag(tag, attributes)?;
        self.out.write_all(b"\n")?;
        self.depth += 1;
        Ok(())
    }

    pub fn open(&mut self, tag: &str) -> io::Result<()> {
        self.open_with(tag, &[])
    }

    pub fn close(&mut self, tag: &str) -> io::Result<()> {
        self.depth = self.depth.saturating_sub(1);
        self.indent()?;
        writeln!(self.out, "</{tag}>")
    }

    /// `<tag attr="value"...>text</tag>` on one line, the text escaped.
    pub fn leaf_with(&mut self, tag: &str, attributes: &[(&str, &str)], text: &str) -> io::Result<()> {
        self.indent()?;
        self.start_tag(tag, attributes)?;
        write_escaped(&mut self.out, text)?;
        writeln!(self.out, "</{tag}>")
    }

    pub fn leaf(&mut self, tag: &str, text: &str) -> io::Result<()> {
        self.leaf_with(tag, &[], text)
    }

    /// Flushes the buffer and hands back the destination.
    pub fn finish(self) -> io::Result<W> {
        self.out.into_inner().map_err(io::IntoInnerError::into_error)
    }

    fn start_tag(&mut self, tag: &str, attributes: &[(&str, &str)]) -> io::Result<()> {
        write!(self.out, "<{tag}")?;
        for (name, value) in attributes {
            write!(self.out, " {name}=\"")?;
            write_escaped(&mut self.out, value)?;
            self.out.write_all(b"\"")?;
        }
        self.out.write_all(b">")
    }

    fn indent(&mut self) -> io::Result<()> {
        for _ in 0..self.depth {
            self.out.write_all(INDENT.as_bytes())?;
        }
        Ok(())
    }
}

/// Writes `text` with the five XML special characters as entities; everything else as is.
pub fn write_escaped(out: &mut impl Write, text: &str) -> io::Result<()> {
    let mut rest = text;
    while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
        out.write_all(&rest.as_bytes()[..at])?;
        let entity: &[u8] = match rest.as_bytes()[at] {
            b'&' => b"&amp;",
            b'<' => b"&lt;",
            b'>' => b"&gt;",
            b'"' => b"&quot;",
            _ => b"&apos;",
        };
        out.write_all(entity)?;
        rest = &rest[at + 1..];
    }
    out.write_all(rest.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(text: &str) -> String {
        let mut out = Vec::new();
        write_escaped(&mut out, text).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_five_special_characters_become_entities() {
        assert_eq!(escaped(r#"A&B <C> "D" 'E'"#), "A&amp;B &lt;C&gt; &quot;D&quot; &apos;E&apos;");
        assert_eq!(escaped("Müller & Söhne"), "Müller &amp; Söhne", "other characters pass as they are");
        assert_eq!(escaped(""), "");
    }

    #[test]
    fn elements_nest_with_indentation_and_escaped_attributes() {
        let mut xml = XmlWriter::new(Vec::new()).unwrap();
        xml.open("A").unwrap();
        xml.leaf_with("B", &[("Ccy", "E\"R")], "1 < 2").unwrap();
        xml.close("A").unwrap();
        let text = String::from_utf8(xml.finish().unwrap()).unwrap();
        assert_eq!(text, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<A>\n  <B Ccy=\"E&quot;R\">1 &lt; 2</B>\n</A>\n");
    }
}
