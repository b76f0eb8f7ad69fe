//! Webhook signatures (SPEC W2).
//!
//! - `X-Signature`: lowercase hex HMAC-SHA256 of the exact body bytes, keyed with the endpoint's
//!   secret (its UTF-8 bytes). This is what the official SDKs' `validate_signature` checks.
//! - `X-Payrail-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`: the same
//!   key over the send time and the body, so a receiver can refuse a replayed delivery (an old
//!   `t`) as well as a forged one. Each attempt has its own `t`; `X-Webhook-ID` stays the same.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// The name of the timestamped signature header.
pub const TIMESTAMPED_HEADER: &str = "x-payrail-signature";

fn mac(secret: &[u8]) -> Hmac<Sha256> {
    Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length")
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// Lowercase hex HMAC-SHA256 of `body` under `secret`: the `X-Signature` value.
pub fn signature_hex(secret: &[u8], body: &[u8]) -> String {
    let mut mac = mac(secret);
    mac.update(body);
    hex(&mac.finalize().into_bytes())
}

/// The `X-Payrail-Signature` value for a send at `unix_secs`.
pub fn timestamped(secret: &[u8], unix_secs: i64, body: &[u8]) -> String {
    let mut mac = mac(secret);
    mac.update(unix_secs.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("t={unix_secs},v1={}", hex(&mac.finalize().into_bytes()))
}

/// Checks an `X-Payrail-Signature` value as a receiver would: the signature matches (in
/// constant time) and `t` is within `tolerance_secs` of `now_secs`.
pub fn verify_timestamped(secret: &[u8], header: &str, body: &[u8], now_secs: i64, tolerance_secs: i64) -> bool {
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", value)) => t = value.parse::<i64>().ok(),
            Some(("v1", value)) => v1 = Some(value),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else { return false };
    if (now_secs - t).abs() > tolerance_secs {
        return false;
    }
    let expected = timestamped(secret, t, body);
    let expected = expected.rsplit_once("v1=").map_or("", |(_, sig)| sig);
    expected.as_bytes().ct_eq(v1.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn w2_signature_is_lowercase_hex_hmac_sha256() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature_hex(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn timestamped_signature_verifies_and_refuses_replays() {
        let header = timestamped(b"whsec_x", 1_700_000_000, b"{}");
        assert!(header.starts_with("t=1700000000,v1="));
        assert!(verify_timestamped(b"whsec_x", &header, b"{}", 1_700_000_100, 300));
        assert!(!verify_timestamped(b"whsec_x", &header, b"{}", 1_700_001_000, 300), "too old");
        assert!(!verify_timestamped(b"whsec_y", &header, b"{}", 1_700_000_000, 300), "wrong key");
        assert!(!verify_timestamped(b"whsec_x", &header, b"{ }", 1_700_000_000, 300), "other body");
        assert!(!verify_timestamped(b"whsec_x", "garbage", b"{}", 1_700_000_000, 300));
    }
}
