//! Bank file formats: each written and parsed beside each other, one type per record or message.

pub mod iso20022;
