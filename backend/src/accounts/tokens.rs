//! Sign-in tokens: HS256 JWTs (algorithm, issuer and audience pinned) whose `jti` is a row
//! in `auth_tokens`, so the server can revoke them. A leaf: it signs, checks and revokes,
//! and knows nothing of users or passwords.

use crate::store::Db;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::crypto::Keyring;
use crate::{Error, Result, now_text, store};

const ISSUER: &str = "hero";
const AUDIENCE: &str = "hero";

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Claims {
    pub sub: String,
    pub jti: String,
    iat: i64,
    pub exp: i64,
    iss: String,
    aud: String,
}

/// A token just issued.
pub(crate) struct Issued {
    pub jti: String,
    pub token: String,
    /// Unix seconds.
    pub expires_at: i64,
}

/// How tokens are checked: made once, not for every request (it holds three sets).
static VALIDATION: std::sync::LazyLock<Validation> = std::sync::LazyLock::new(|| {
    let mut v = Validation::new(Algorithm::HS256);
    v.set_issuer(&[ISSUER]);
    v.set_audience(&[AUDIENCE]);
    v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    v.leeway = 0;
    v
});

/// Signs a token for `user_id` valid for `ttl` and records its `jti`.
pub(crate) async fn issue(
    db: &Db,
    keys: &Keyring,
    user_id: i64,
    ttl: time::Duration,
) -> Result<Issued> {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let exp = now + ttl.whole_seconds();
    let jti = uuid::Uuid::new_v4().to_string();
    let claims = Claims {
        sub: user_id.to_string(),
        jti: jti.clone(),
        iat: now,
        exp,
        iss: ISSUER.into(),
        aud: AUDIENCE.into(),
    };
    let token = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(keys.jwt_secret()),
    )
    .map_err(|e| Error::Internal(format!("token signing failed: {e}")))?;
    store::tokens::insert(db, &jti, user_id, &now_text(), exp).await?;
    Ok(Issued {
        jti,
        token,
        expires_at: exp,
    })
}

/// The claims of a well-signed, unexpired token (its row is checked by the caller).
pub(crate) fn verify(keys: &Keyring, token: &str) -> Result<Claims> {
    jsonwebtoken::decode::<Claims>(
        token,
        &DecodingKey::from_secret(keys.jwt_secret()),
        &VALIDATION,
    )
    .map(|data| data.claims)
    .map_err(|e| match e.kind() {
        jsonwebtoken::errors::ErrorKind::ExpiredSignature => {
            Error::Unauthorized("your sign-in has expired; sign in again")
        }
        _ => Error::Unauthorized("invalid sign-in token"),
    })
}

/// Revokes one token.
pub(crate) async fn revoke(db: &Db, jti: &str) -> Result<()> {
    store::tokens::revoke(db, jti, &now_text()).await
}

/// Revokes every token of a user, inside the transaction that changes the account.
pub(crate) async fn revoke_all(c: &mut crate::store::Write<'_>, user_id: i64) -> Result<()> {
    store::tokens::revoke_all(c, user_id, &now_text()).await
}
