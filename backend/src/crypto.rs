//! Secrets at rest: AES-256-GCM with associated data that names the row a ciphertext belongs
//! to, the master key (environment or a 0600 key file) and one data key per user, wrapped by
//! the master key.
//!
//! Sealed layout: `version (1 byte) || nonce (12 bytes) || ciphertext || tag (16 bytes)`.
//! The associated data is not stored: the caller rebuilds it from the row (for example
//! `users.data_key:42`), so a ciphertext moved to another row, or another column, fails to
//! open instead of decrypting under the wrong owner.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::Engine;
use rand::RngCore;

const VERSION: u8 = 1;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
pub const KEY_LEN: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    /// Too short, or an unknown layout version: not something this module sealed.
    #[error("ciphertext is malformed")]
    Malformed,
    /// Authentication failed: wrong key, tampered bytes, or sealed for another row.
    #[error("ciphertext does not open with this key for this row (wrong key, tampered, or moved)")]
    Rejected,
    #[error("master key is invalid: {0}")]
    BadMasterKey(String),
    #[error("key file {path}: {reason}")]
    KeyFile { path: PathBuf, reason: String },
}

/// A 256-bit AES key. Deliberately neither `Serialize` nor `Debug`-printable.
#[derive(Clone)]
pub struct SecretKey([u8; KEY_LEN]);

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(…)")
    }
}

impl SecretKey {
    pub fn random() -> Self {
        let mut k = [0u8; KEY_LEN];
        OsRng.fill_bytes(&mut k);
        SecretKey(k)
    }

    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Self {
        SecretKey(bytes)
    }

    fn from_slice(bytes: &[u8]) -> Result<Self, CryptoError> {
        let arr: [u8; KEY_LEN] = bytes.try_into().map_err(|_| CryptoError::Malformed)?;
        Ok(SecretKey(arr))
    }

    /// Parses a key written as 64 hex digits or as standard base64 of 32 bytes.
    pub fn parse(text: &str) -> Result<Self, CryptoError> {
        let text = text.trim();
        let bytes = if text.len() == 2 * KEY_LEN && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            (0..KEY_LEN)
                .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|e| CryptoError::BadMasterKey(e.to_string()))?
        } else {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|_| {
                    CryptoError::BadMasterKey(
                        "expected 64 hex digits or base64 of 32 bytes (try: openssl rand -hex 32)"
                            .into(),
                    )
                })?
        };
        if bytes.len() != KEY_LEN {
            return Err(CryptoError::BadMasterKey(format!(
                "expected 32 bytes, got {} (try: openssl rand -hex 32)",
                bytes.len()
            )));
        }
        Self::from_slice(&bytes)
    }

    fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub(crate) fn bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }
}

/// Encrypts `plaintext` for the row named by `aad`.
pub fn seal(key: &SecretKey, aad: &[u8], plaintext: &[u8]) -> Vec<u8> {
    let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(&key.0));
    let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
    // Encryption with a valid key and nonce cannot fail for inputs below AES-GCM's 64 GiB
    // message limit, which every caller is far under.
    let ct = cipher
        .encrypt(
            &nonce,
            Payload {
                msg: plaintext,
                aad,
            },
        )
        .expect("AES-GCM encryption of an in-memory buffer");
    let mut out = Vec::with_capacity(1 + NONCE_LEN + ct.len());
    out.push(VERSION);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&ct);
    out
}

/// Decrypts what [`seal`] produced for the same key and the same `aad`.
pub fn open(key: &SecretKey, aad: &[u8], sealed: &[u8]) -> Result<Vec<u8>, CryptoError> {
    if sealed.len() < 1 + NONCE_LEN + TAG_LEN || sealed[0] != VERSION {
        return Err(CryptoError::Malformed);
    }
    let (nonce, ct) = sealed[1..].split_at(NONCE_LEN);
    let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(&key.0));
    cipher
        .decrypt(Nonce::from_slice(nonce), Payload { msg: ct, aad })
        .map_err(|_| CryptoError::Rejected)
}

/// The associated data of a user's wrapped data key.
pub fn data_key_aad(user_id: i64) -> Vec<u8> {
    format!("users.data_key:{user_id}").into_bytes()
}

/// The master key and the keys derived from it.
/// A key of its own for one purpose (`label`, such as `b"hero/memory-hash/v1"`), derived
/// from `key` by HKDF-SHA256: what it makes tells nothing of `key`, nor of another label's.
pub fn derived_key(key: &SecretKey, label: &[u8]) -> [u8; KEY_LEN] {
    let hk = hkdf::Hkdf::<sha2::Sha256>::new(Some(b"hero"), key.bytes());
    let mut out = [0u8; KEY_LEN];
    // 32 bytes is far below HKDF-SHA256's 8160-byte output limit.
    hk.expand(label, &mut out).expect("HKDF output length");
    out
}

pub struct Keyring {
    master: SecretKey,
    jwt: [u8; KEY_LEN],
    fanout: [u8; KEY_LEN],
    key_prints: [u8; KEY_LEN],
}

impl Keyring {
    pub fn new(master: SecretKey) -> Self {
        let hk = hkdf::Hkdf::<sha2::Sha256>::new(Some(b"hero"), master.bytes());
        let mut jwt = [0u8; KEY_LEN];
        // 32 bytes is far below HKDF-SHA256's 8160-byte output limit.
        hk.expand(b"hero/jwt-hs256/v1", &mut jwt)
            .expect("HKDF output length");
        let mut fanout = [0u8; KEY_LEN];
        hk.expand(b"hero/fanout/v1", &mut fanout)
            .expect("HKDF output length");
        let mut key_prints = [0u8; KEY_LEN];
        hk.expand(b"hero/key-fingerprint/v1", &mut key_prints)
            .expect("HKDF output length");
        Keyring {
            master,
            jwt,
            fanout,
            key_prints,
        }
    }

    pub fn master(&self) -> &SecretKey {
        &self.master
    }

    /// The HS256 secret for sign-in tokens, derived from the master key, so rotating the
    /// master key also ends every sign-in.
    pub fn jwt_secret(&self) -> &[u8] {
        &self.jwt
    }

    /// The key that seals the live events instances send each other through the database
    /// ([`crate::conversation::cluster`]).
    pub fn fanout_key(&self) -> SecretKey {
        SecretKey::from_bytes(self.fanout)
    }

    /// A provider API key's fingerprint: HMAC-SHA-256 under a key derived from the master
    /// key, hex, its first 16 bytes. The Service spend line groups a user's agents by it; it
    /// is never sent, and confirms no guessed key to one who reads the database.
    pub fn key_fingerprint(&self, api_key: &str) -> String {
        use hkdf::hmac::{Hmac, Mac};
        let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(&self.key_prints)
            .expect("HMAC takes any key length");
        mac.update(api_key.as_bytes());
        mac.finalize().into_bytes()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Wraps a user's data key for storage in `users.data_key`.
    pub fn wrap_data_key(&self, user_id: i64, data_key: &SecretKey) -> Vec<u8> {
        seal(&self.master, &data_key_aad(user_id), data_key.bytes())
    }

    /// Unwraps `users.data_key` of row `user_id`.
    pub fn unwrap_data_key(&self, user_id: i64, wrapped: &[u8]) -> Result<SecretKey, CryptoError> {
        let bytes = open(&self.master, &data_key_aad(user_id), wrapped)?;
        SecretKey::from_slice(&bytes)
    }
}

/// Where the master key came from, for the start-up log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    Environment,
    ExistingFile(PathBuf),
    CreatedFile(PathBuf),
}

/// The master key: from `HERO_MASTER_KEY` when given, else from `<data dir>/master.key`,
/// which is created (mode 0600) on first run.
pub fn load_master_key(
    from_env: Option<&str>,
    data_dir: &Path,
) -> Result<(SecretKey, KeySource), CryptoError> {
    if let Some(text) = from_env.filter(|t| !t.trim().is_empty()) {
        return Ok((SecretKey::parse(text)?, KeySource::Environment));
    }
    let path = data_dir.join("master.key");
    let key_file_err = |reason: String| CryptoError::KeyFile {
        path: path.clone(),
        reason,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            check_private(&path).map_err(key_file_err)?;
            let key = SecretKey::parse(&text).map_err(|e| key_file_err(e.to_string()))?;
            Ok((key, KeySource::ExistingFile(path)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = SecretKey::random();
            let mut opts = std::fs::OpenOptions::new();
            opts.write(true).create_new(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                opts.mode(0o600);
            }
            let mut f = opts.open(&path).map_err(|e| key_file_err(e.to_string()))?;
            f.write_all(format!("{}\n", key.to_hex()).as_bytes())
                .and_then(|_| f.sync_all())
                .map_err(|e| key_file_err(e.to_string()))?;
            Ok((key, KeySource::CreatedFile(path)))
        }
        Err(e) => Err(key_file_err(e.to_string())),
    }
}

/// A key file others can read (or write) is refused, with the command that fixes it:
/// whoever reads it opens every secret in the data directory.
fn check_private(path: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map_err(|e| e.to_string())?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(format!(
                "other users can read or change it (mode {:o}); make it private with `chmod 600 {}`",
                mode & 0o777,
                path.display()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let key = SecretKey::random();
        let sealed = seal(&key, b"frames.payload:1", b"hello");
        assert_eq!(open(&key, b"frames.payload:1", &sealed).unwrap(), b"hello");
        // A fresh nonce each time: sealing twice never gives the same bytes.
        assert_ne!(sealed, seal(&key, b"frames.payload:1", b"hello"));
    }

    #[test]
    fn tampered_ciphertext_is_rejected() {
        let key = SecretKey::random();
        let sealed = seal(&key, b"row:1", b"secret text");
        for i in 1..sealed.len() {
            let mut bad = sealed.clone();
            bad[i] ^= 0x01;
            assert_eq!(
                open(&key, b"row:1", &bad),
                Err(CryptoError::Rejected),
                "byte {i}"
            );
        }
    }

    #[test]
    fn truncated_or_unknown_version_is_malformed() {
        let key = SecretKey::random();
        let sealed = seal(&key, b"row:1", b"x");
        assert_eq!(
            open(&key, b"row:1", &sealed[..20]),
            Err(CryptoError::Malformed)
        );
        assert_eq!(open(&key, b"row:1", &[]), Err(CryptoError::Malformed));
        let mut v2 = sealed.clone();
        v2[0] = 2;
        assert_eq!(open(&key, b"row:1", &v2), Err(CryptoError::Malformed));
    }

    #[test]
    fn ciphertext_moved_to_another_row_is_rejected() {
        let key = SecretKey::random();
        let ring = Keyring::new(key.clone());
        let dk = SecretKey::random();
        let wrapped_for_1 = ring.wrap_data_key(1, &dk);
        assert_eq!(
            ring.unwrap_data_key(1, &wrapped_for_1).unwrap().bytes(),
            dk.bytes()
        );
        assert_eq!(
            ring.unwrap_data_key(2, &wrapped_for_1).err(),
            Some(CryptoError::Rejected)
        );
    }

    #[test]
    fn wrong_key_is_rejected() {
        let sealed = seal(&SecretKey::random(), b"row:1", b"x");
        assert_eq!(
            open(&SecretKey::random(), b"row:1", &sealed),
            Err(CryptoError::Rejected)
        );
    }

    #[test]
    fn master_key_text_forms() {
        let hex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        assert_eq!(SecretKey::parse(hex).unwrap().to_hex(), hex);
        let b64 = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        assert_eq!(SecretKey::parse(&b64).unwrap().bytes(), &[7u8; 32]);
        let short = SecretKey::parse("abcd").unwrap_err().to_string();
        assert!(short.contains("32 bytes"), "{short}");
        assert!(matches!(
            SecretKey::parse("not a key!"),
            Err(CryptoError::BadMasterKey(_))
        ));
    }

    #[test]
    fn key_file_is_created_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let (k1, src1) = load_master_key(None, dir.path()).unwrap();
        assert!(matches!(src1, KeySource::CreatedFile(_)));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("master.key"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (k2, src2) = load_master_key(None, dir.path()).unwrap();
        assert!(matches!(src2, KeySource::ExistingFile(_)));
        assert_eq!(k1.bytes(), k2.bytes());
        let (_, src3) = load_master_key(Some(&"ab".repeat(32)), dir.path()).unwrap();
        assert_eq!(src3, KeySource::Environment);
    }

    #[cfg(unix)]
    #[test]
    fn a_key_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        load_master_key(None, dir.path()).unwrap();
        let path = dir.path().join("master.key");
        for mode in [0o644, 0o640, 0o604, 0o660, 0o606] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = load_master_key(None, dir.path()).unwrap_err().to_string();
            assert!(
                err.contains("chmod 600") && err.contains(&format!("{mode:o}")),
                "{err}"
            );
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        load_master_key(None, dir.path()).unwrap();
    }

    #[test]
    fn corrupt_key_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("master.key"), "garbage").unwrap();
        let err = load_master_key(None, dir.path()).unwrap_err().to_string();
        assert!(err.contains("master.key"), "{err}");
    }
}
