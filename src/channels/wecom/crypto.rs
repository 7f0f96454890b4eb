//! WeCom's classic callback encryption (the scheme of its `WXBizMsgCrypt` samples), for the
//! callback-URL transport: `msg_signature` is the hex SHA-1 of the token, timestamp, nonce
//! and ciphertext sorted and joined; the ciphertext is base64 of AES-256-CBC under the
//! EncodingAESKey (43 characters of base64 without its `=`, 32 bytes) with the key's first
//! 16 bytes as IV, padded PKCS#7 to 32-byte blocks; the plaintext is 16 random bytes, the
//! message length (4 bytes, big-endian), the message, and the receiver id (the corp id, or
//! the bot id).

use aes::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use base64::Engine;
use base64::alphabet;
use base64::engine::general_purpose::STANDARD;
use base64::engine::{GeneralPurpose, GeneralPurposeConfig};
use sha1::{Digest, Sha1};
use subtle::ConstantTimeEq;

use crate::settings::Secret;

/// The block size the padding rounds to (not AES's 16).
const PAD_BLOCK: usize = 32;

/// Base64 that accepts non-zero trailing bits: EncodingAESKeys are 43 random base64
/// characters, so the last one rarely ends in the zero bits a strict decoder demands (the
/// official samples' key does not).
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

/// Why a callback could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    /// The EncodingAESKey is not 43 characters of base64 for 32 bytes.
    #[error("the EncodingAESKey must be 43 characters of base64 (32 bytes)")]
    BadKey,
    /// `msg_signature` does not match.
    #[error("the message signature does not match")]
    BadSignature,
    /// The ciphertext is not base64, not whole blocks, or badly padded.
    #[error("the message cannot be decrypted")]
    Undecryptable,
    /// The decrypted message is addressed to another receiver.
    #[error("the message is for another receiver")]
    WrongReceiver,
}

/// The key, the token and the receiver id of one app or bot.
pub struct MsgCrypt {
    token: Secret,
    key: [u8; 32],
    receiver: String,
}

type Enc = cbc::Encryptor<aes::Aes256>;
type Dec = cbc::Decryptor<aes::Aes256>;

/// `hex(sha1(sorted(parts).join("")))`.
pub fn signature(parts: &mut [&str]) -> String {
    parts.sort_unstable();
    let mut h = Sha1::new();
    for p in parts.iter() {
        h.update(p.as_bytes());
    }
    hex::encode(h.finalize())
}

impl MsgCrypt {
    /// The crypt for `token`, `encoding_aes_key` and `receiver` (the corp id or bot id the
    /// messages must name; empty: not checked).
    pub fn new(
        token: Secret,
        encoding_aes_key: &Secret,
        receiver: &str,
    ) -> Result<Self, CryptoError> {
        let k = encoding_aes_key.expose().trim();
        if k.len() != 43 {
            return Err(CryptoError::BadKey);
        }
        let bytes = LENIENT
            .decode(format!("{k}="))
            .map_err(|_| CryptoError::BadKey)?;
        let key: [u8; 32] = bytes.try_into().map_err(|_| CryptoError::BadKey)?;
        Ok(Self {
            token,
            key,
            receiver: receiver.to_string(),
        })
    }

    /// Checks `msg_signature` over `timestamp`, `nonce` and `encrypted`, then decrypts it.
    pub fn open(
        &self,
        msg_signature: &str,
        timestamp: &str,
        nonce: &str,
        encrypted: &str,
    ) -> Result<Vec<u8>, CryptoError> {
        let expected = signature(&mut [self.token.expose(), timestamp, nonce, encrypted]);
        if !bool::from(expected.as_bytes().ct_eq(msg_signature.trim().as_bytes())) {
            return Err(CryptoError::BadSignature);
        }
        self.decrypt(encrypted)
    }

    /// Decrypts `encrypted` and checks its receiver.
    pub fn decrypt(&self, encrypted: &str) -> Result<Vec<u8>, CryptoError> {
        let mut buf = STANDARD
            .decode(encrypted.trim())
            .map_err(|_| CryptoError::Undecryptable)?;
        if buf.is_empty() || buf.len() % 16 != 0 {
            return Err(CryptoError::Undecryptable);
        }
        let iv: [u8; 16] = self.key[..16].try_into().map_err(|_| CryptoError::BadKey)?;
        let plain = Dec::new(&self.key.into(), &iv.into())
            .decrypt_padded_mut::<aes::cipher::block_padding::NoPadding>(&mut buf)
            .map_err(|_| CryptoError::Undecryptable)?;
        let pad = usize::from(*plain.last().ok_or(CryptoError::Undecryptable)?);
        if pad == 0
            || pad > PAD_BLOCK
            || pad > plain.len()
            || plain[plain.len() - pad..]
                .iter()
                .any(|b| usize::from(*b) != pad)
        {
            return Err(CryptoError::Undecryptable);
        }
        let plain = &plain[..plain.len() - pad];
        if plain.len() < 20 {
            return Err(CryptoError::Undecryptable);
        }
        let len = u32::from_be_bytes([plain[16], plain[17], plain[18], plain[19]]) as usize;
        let end = 20usize
            .checked_add(len)
            .filter(|e| *e <= plain.len())
            .ok_or(CryptoError::Undecryptable)?;
        let receiver = &plain[end..];
        if !self.receiver.is_empty() && receiver != self.receiver.as_bytes() {
            return Err(CryptoError::WrongReceiver);
        }
        Ok(plain[20..end].to_vec())
    }

    /// Encrypts a reply: the ciphertext and its signature for `timestamp` and `nonce`.
    pub fn seal(&self, message: &[u8], timestamp: &str, nonce: &str) -> (String, String) {
        let random: [u8; 16] = rand::random();
        let mut plain = Vec::with_capacity(20 + message.len() + self.receiver.len() + PAD_BLOCK);
        plain.extend_from_slice(&random);
        plain.extend_from_slice(&(message.len() as u32).to_be_bytes());
        plain.extend_from_slice(message);
        plain.extend_from_slice(self.receiver.as_bytes());
        let pad = PAD_BLOCK - plain.len() % PAD_BLOCK;
        plain.extend(std::iter::repeat_n(pad as u8, pad));
        let len = plain.len();
        let iv: [u8; 16] = match self.key[..16].try_into() {
            Ok(iv) => iv,
            Err(_) => unreachable!("the key is 32 bytes"),
        };
        let encrypted = match Enc::new(&self.key.into(), &iv.into())
            .encrypt_padded_mut::<aes::cipher::block_padding::NoPadding>(
            &mut plain, len,
        ) {
            Ok(c) => STANDARD.encode(c),
            Err(_) => unreachable!("the plaintext was padded to whole blocks"),
        };
        let sig = signature(&mut [self.token.expose(), timestamp, nonce, &encrypted]);
        (encrypted, sig)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C";

    fn crypt(receiver: &str) -> MsgCrypt {
        MsgCrypt::new(Secret::new("QDG6eK"), &Secret::new(KEY), receiver).unwrap()
    }

    #[test]
    fn sealed_messages_open_and_tampering_is_refused() {
        let c = crypt("wx5823bf96d3bd56c7");
        let body = br#"{"msgtype":"event","event":{"eventtype":"template_card_event"}}"#;
        let (enc, sig) = c.seal(body, "1409659589", "263014780");
        assert_eq!(c.open(&sig, "1409659589", "263014780", &enc).unwrap(), body);
        assert_eq!(
            c.open(&sig, "1409659590", "263014780", &enc),
            Err(CryptoError::BadSignature)
        );
        assert_eq!(
            crypt("another-corp").decrypt(&enc),
            Err(CryptoError::WrongReceiver)
        );
        let mut bytes = STANDARD.decode(&enc).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x55;
        assert_eq!(
            c.decrypt(&STANDARD.encode(&bytes)),
            Err(CryptoError::Undecryptable)
        );
        assert_eq!(c.decrypt("not base64!"), Err(CryptoError::Undecryptable));
        // Messages whose padding is a whole 32-byte block.
        for n in 0..70 {
            let m = vec![b'x'; n];
            let (enc, _) = c.seal(&m, "1", "2");
            assert_eq!(c.decrypt(&enc).unwrap(), m, "{n}");
        }
    }

    #[test]
    fn keys_are_checked() {
        assert!(MsgCrypt::new(Secret::new("t"), &Secret::new("short"), "").is_err());
        assert!(MsgCrypt::new(Secret::new("t"), &Secret::new("!".repeat(43)), "").is_err());
    }

    #[test]
    fn the_signature_sorts_its_parts() {
        assert_eq!(
            signature(&mut ["b", "a", "c"]),
            signature(&mut ["c", "b", "a"])
        );
        assert_eq!(
            signature(&mut ["abc"]),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
    }
}
