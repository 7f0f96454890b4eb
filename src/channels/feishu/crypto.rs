//! The platform's callback cryptography: AES-256-CBC bodies (key = SHA-256 of the Encrypt
//! Key, base64 of IV ‖ ciphertext, PKCS#7) and the `X-Lark-Signature` check (the MAC of a
//! card button is in `button.rs`).
//!
//! Every comparison of a secret-derived value is constant time.

use aes::Aes256;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cbc::cipher::block_padding::Pkcs7;
use cbc::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Why an encrypted body could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecryptError {
    /// Not base64.
    #[error("the encrypted body is not base64")]
    Base64,
    /// Too short or not a whole number of blocks.
    #[error("the encrypted body has an invalid length")]
    Length,
    /// Wrong key, or tampered ciphertext.
    #[error("the encrypted body does not decrypt with the configured encrypt_key")]
    Padding,
    /// Decrypted, but not UTF-8 text.
    #[error("the decrypted body is not UTF-8 text")]
    Utf8,
}

fn aes_key(encrypt_key: &str) -> [u8; 32] {
    Sha256::digest(encrypt_key.as_bytes()).into()
}

/// Decrypts the `encrypt` field of a callback body.
pub fn decrypt(encrypt_key: &str, encrypted_b64: &str) -> Result<String, DecryptError> {
    let raw = STANDARD
        .decode(encrypted_b64.trim())
        .map_err(|_| DecryptError::Base64)?;
    if raw.len() < 32 || raw.len() % 16 != 0 {
        return Err(DecryptError::Length);
    }
    let (iv, ciphertext) = raw.split_at(16);
    let key = aes_key(encrypt_key);
    let plain = cbc::Decryptor::<Aes256>::new((&key).into(), iv.into())
        .decrypt_padded_vec_mut::<Pkcs7>(ciphertext)
        .map_err(|_| DecryptError::Padding)?;
    String::from_utf8(plain).map_err(|_| DecryptError::Utf8)
}

/// Encrypts `plaintext` the way the platform does, with the given IV (tests, fixtures).
pub fn encrypt_with_iv(encrypt_key: &str, iv: [u8; 16], plaintext: &str) -> String {
    STANDARD.encode(encrypt_bytes(encrypt_key, iv, plaintext.as_bytes()))
}

/// IV ‖ AES-256-CBC(`plaintext`, PKCS#7), before base64: for tests that need bytes that are
/// not text, or a body cut short.
pub fn encrypt_bytes(encrypt_key: &str, iv: [u8; 16], plaintext: &[u8]) -> Vec<u8> {
    let key = aes_key(encrypt_key);
    let ciphertext = cbc::Encryptor::<Aes256>::new((&key).into(), (&iv).into())
        .encrypt_padded_vec_mut::<Pkcs7>(plaintext);
    let mut out = iv.to_vec();
    out.extend_from_slice(&ciphertext);
    out
}

/// Encrypts `plaintext` with a random IV.
pub fn encrypt(encrypt_key: &str, plaintext: &str) -> String {
    let iv: [u8; 16] = rand::random();
    encrypt_with_iv(encrypt_key, iv, plaintext)
}

/// The `X-Lark-Signature` of a request: lowercase hex of SHA-256(timestamp ‖ nonce ‖
/// encrypt_key ‖ body).
pub fn signature(timestamp: &str, nonce: &str, encrypt_key: &str, body: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(timestamp.as_bytes());
    h.update(nonce.as_bytes());
    h.update(encrypt_key.as_bytes());
    h.update(body);
    hex::encode(h.finalize())
}

/// Whether `given` is the signature of the request, compared in constant time.
pub fn verify_signature(
    timestamp: &str,
    nonce: &str,
    encrypt_key: &str,
    body: &[u8],
    given: &str,
) -> bool {
    let expected = signature(timestamp, nonce, encrypt_key, body);
    ct_eq_str(&expected, &given.trim().to_ascii_lowercase())
}

/// Constant-time string equality (the length is not secret).
pub(crate) fn ct_eq_str(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encryption_round_trips_and_detects_a_wrong_key() {
        let body = encrypt("key", r#"{"challenge":"c"}"#);
        assert_eq!(decrypt("key", &body).unwrap(), r#"{"challenge":"c"}"#);
        assert!(decrypt("other", &body).is_err());
        assert_eq!(decrypt("key", "!!!"), Err(DecryptError::Base64));
        assert_eq!(
            decrypt("key", &STANDARD.encode([0u8; 20])),
            Err(DecryptError::Length)
        );
        // A whole number of blocks whose last one is not padding.
        let mut unpadded = encrypt_bytes("key", [1; 16], &[b'x'; 32]);
        unpadded.truncate(48);
        assert_eq!(
            decrypt("key", &STANDARD.encode(&unpadded)),
            Err(DecryptError::Padding)
        );
        let latin1 = encrypt_bytes("key", [1; 16], &[0xff, 0xfe, b'{']);
        assert_eq!(
            decrypt("key", &STANDARD.encode(latin1)),
            Err(DecryptError::Utf8)
        );
    }

    #[test]
    fn signatures_are_checked() {
        let sig = signature("1700000000", "n", "k", b"{}");
        assert_eq!(sig.len(), 64);
        assert!(verify_signature("1700000000", "n", "k", b"{}", &sig));
        assert!(verify_signature(
            "1700000000",
            "n",
            "k",
            b"{}",
            &sig.to_uppercase()
        ));
        assert!(!verify_signature("1700000001", "n", "k", b"{}", &sig));
        assert!(!verify_signature("1700000000", "n", "k", b"{ }", &sig));
        assert!(!verify_signature("1700000000", "n", "k", b"{}", ""));
    }
}
