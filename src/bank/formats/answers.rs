//! The one entry point for a bank's answer file (SPEC B5): [`read`] tells the format from the
//! bytes and hands them to its reader, which returns everything the file says as
//! `domain::bank_answer` values, or refuses the whole file with an [`AnswerError`] saying what
//! is wrong and where (a NACHA line, or an XML element path and line). A file is applied
//! whole or not at all, so one bad record refuses it all.
//!
//! Detection: an XML document whose root namespace is
//! `urn:iso:std:iso:20022:tech:xsd:` followed by `pain.002.001.03`, `.10` or `.12`,
//! `camt.053.001.02`, `.04`, `.06` or `.08`, or `camt.054` of the same versions (most banks
//! still send `.02`; the camt reader takes the older shapes too: `Sts` as text, a batch's amounts
//! under `AmtDtls/TxAmt`); otherwise text starting with `101` (a NACHA file
//! header: record type 1, priority code 01). Anything else is an unknown format. No input makes
//! a reader panic (see the garbage and truncation tests below).

use crate::domain::bank_answer::{AnswerFile, AnswerFormat};

pub use super::answer_error::AnswerError;
use super::iso20022::{camt, pain002};
use super::nacha;

/// The ISO 20022 namespaces Payrail reads, and their format.
const NAMESPACES: &[(&str, AnswerFormat)] = &[
    ("urn:iso:std:iso:20022:tech:xsd:pain.002.001.03", AnswerFormat::Pain002),
    ("urn:iso:std:iso:20022:tech:xsd:pain.002.001.10", AnswerFormat::Pain002),
    ("urn:iso:std:iso:20022:tech:xsd:pain.002.001.12", AnswerFormat::Pain002),
    ("urn:iso:std:iso:20022:tech:xsd:camt.053.001.02", AnswerFormat::Camt053),
    ("urn:iso:std:iso:20022:tech:xsd:camt.053.001.04", AnswerFormat::Camt053),
    ("urn:iso:std:iso:20022:tech:xsd:camt.053.001.06", AnswerFormat::Camt053),
    ("urn:iso:std:iso:20022:tech:xsd:camt.053.001.08", AnswerFormat::Camt053),
    ("urn:iso:std:iso:20022:tech:xsd:camt.054.001.02", AnswerFormat::Camt054),
    ("urn:iso:std:iso:20022:tech:xsd:camt.054.001.04", AnswerFormat::Camt054),
    ("urn:iso:std:iso:20022:tech:xsd:camt.054.001.06", AnswerFormat::Camt054),
    ("urn:iso:std:iso:20022:tech:xsd:camt.054.001.08", AnswerFormat::Camt054),
];

/// Reads a bank's answer file, whatever its format.
pub fn read(bytes: &[u8]) -> Result<AnswerFile, AnswerError> {
    match detect(bytes)? {
        AnswerFormat::NachaReturns => nacha::answers::read(bytes),
        AnswerFormat::Pain002 => pain002::read(bytes),
        format @ (AnswerFormat::Camt053 | AnswerFormat::Camt054) => camt::read(bytes, format),
    }
}

/// The file's format, from its first bytes (and the XML root's namespace).
pub fn detect(bytes: &[u8]) -> Result<AnswerFormat, AnswerError> {
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let first = body.iter().position(|b| !b.is_ascii_whitespace()).map(|i| &body[i..]).unwrap_or_default();
    if first.starts_with(b"<") {
        let namespace = super::iso20022::read::root_namespace(body)
            .ok_or_else(|| AnswerError::new(None, "line 1", "an XML document without a namespace on its root element"))?;
        return NAMESPACES.iter().find(|(ns, _)| *ns == namespace).map(|(_, format)| *format).ok_or_else(|| {
            AnswerError::new(
                None,
                "line 1",
                format!(
                    "XML namespace {namespace:?} is not a format Payrail reads (pain.002.001.03/.10/.12, camt.053.001.02/.04/.06/.08, camt.054.001.02/.04/.06/.08)"
                ),
            )
        });
    }
    if bytes.starts_with(b"101") {
        return Ok(AnswerFormat::NachaReturns);
    }
    Err(AnswerError::new(None, "line 1", "neither ISO 20022 XML nor a NACHA file (which starts with a 101 file header)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b5_formats_are_told_by_namespace_or_nacha_header() {
        let xml = |ns: &str| format!("<?xml version=\"1.0\"?>\n<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:{ns}\"></Document>");
        assert_eq!(detect(xml("pain.002.001.03").as_bytes()), Ok(AnswerFormat::Pain002));
        assert_eq!(detect(xml("pain.002.001.10").as_bytes()), Ok(AnswerFormat::Pain002));
        assert_eq!(detect(xml("camt.053.001.08").as_bytes()), Ok(AnswerFormat::Camt053));
        assert_eq!(detect(xml("camt.054.001.08").as_bytes()), Ok(AnswerFormat::Camt054));
        assert_eq!(detect(xml("camt.053.001.02").as_bytes()), Ok(AnswerFormat::Camt053));
        assert_eq!(detect(xml("camt.054.001.06").as_bytes()), Ok(AnswerFormat::Camt054));
        assert!(detect(xml("camt.053.001.01").as_bytes()).unwrap_err().message.contains("not a format Payrail reads"));
        assert!(detect(xml("pain.001.001.09").as_bytes()).is_err(), "our own payment files are not answers");
        assert!(detect(b"<Document><A/></Document>").unwrap_err().message.contains("without a namespace"));
        assert_eq!(detect(b"101 021000021"), Ok(AnswerFormat::NachaReturns));
        let err = read(b"hello").unwrap_err();
        assert_eq!(err.to_string(), "unknown format: line 1: neither ISO 20022 XML nor a NACHA file (which starts with a 101 file header)");
        assert!(read(b"").is_err());
    }

    /// Cheap xorshift: the garbage is the same on every run, so a failure reproduces.
    fn noise(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    #[test]
    fn b5_garbage_and_truncated_files_are_refused_never_a_panic() {
        let samples = [
            super::super::iso20022::camt::tests::SAMPLE_053.as_bytes().to_vec(),
            super::super::iso20022::pain002::tests::SAMPLE_03.as_bytes().to_vec(),
            super::super::nacha::answers::tests::sample().into_bytes(),
        ];
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for sample in &samples {
            assert!(read(sample).is_ok(), "the sample itself reads");
            for cut in (0..sample.len()).step_by(7) {
                let _ = read(&sample[..cut]);
            }
            for _ in 0..300 {
                let mut bytes = sample.clone();
                for _ in 0..1 + noise(&mut seed) % 4 {
                    let at = (noise(&mut seed) as usize) % bytes.len();
                    bytes[at] = noise(&mut seed) as u8;
                }
                let _ = read(&bytes);
            }
        }
        for _ in 0..300 {
            let len = (noise(&mut seed) % 300) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| noise(&mut seed) as u8).collect();
            if len > 3 && noise(&mut seed).is_multiple_of(2) {
                bytes[..3].copy_from_slice(b"101");
            }
            assert!(read(&bytes).is_err());
        }
    }
}
