//! The settings file as a backup holds it: comments and every setting
//! kept, the secret values taken out. The settings that hold a secret are
//! `api.token` (it also signs the viewer's sessions) and a password inside
//! `store.url`; the other credentials are never settings (they come from
//! the environment or `.env`, which no backup holds:
//! `gateway::credentials::secret_variables`).

use crate::{Error, Result};

/// `text` (a `g2.toml`) without its secret values, and the names of the
/// settings changed. A `store.url` naming a SQLite file of its own becomes
/// `sqlite:`: a restore puts the store at `data/g2.db`.
pub fn without_secrets(text: &str) -> Result<(String, Vec<String>)> {
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| Error::Config(format!("g2.toml does not parse: {e}")))?;
    let mut removed = Vec::new();
    if let Some(api) = doc.get_mut("api").and_then(|t| t.as_table_like_mut())
        && api.remove("token").is_some()
    {
        removed.push("api.token".to_string());
    }
    if let Some(store) = doc.get_mut("store").and_then(|t| t.as_table_like_mut())
        && let Some(url) = store.get("url").and_then(|u| u.as_str())
        && let Some(clean) = without_password(url)
    {
        store.insert("url", toml_edit::value(clean));
        removed.push("the password in store.url".to_string());
    }
    if let Some(store) = doc.get_mut("store").and_then(|t| t.as_table_like_mut())
        && store
            .get("url")
            .and_then(|u| u.as_str())
            .is_some_and(|u| u.starts_with("sqlite:") && u != "sqlite:")
    {
        store.insert("url", toml_edit::value("sqlite:"));
        removed.push("store.url's SQLite file (restored to data/g2.db)".to_string());
    }
    Ok((doc.to_string(), removed))
}

/// A URL with `user:password@`, without its password; `None` when it
/// holds none.
pub fn without_password(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let (user, host) = rest.rsplit_once('@')?;
    let (user, _password) = user.split_once(':')?;
    Some(format!("{scheme}://{user}@{host}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_taken_out_and_the_rest_kept() {
        let text = "# mine\nassistant_name = \"Ada\"\n\n[api]\nlisten = \"0.0.0.0:4170\"\ntoken = \"s3cret-s3cret-s3cret\"\n\n[store]\nurl = \"postgres://g2:hunter2@db:5432/g2\"\n";
        let (clean, removed) = without_secrets(text).unwrap();
        assert!(
            !clean.contains("s3cret") && !clean.contains("hunter2"),
            "{clean}"
        );
        assert!(clean.contains("# mine") && clean.contains("listen = \"0.0.0.0:4170\""));
        assert!(clean.contains("postgres://g2@db:5432/g2"), "{clean}");
        assert_eq!(removed, ["api.token", "the password in store.url"]);
        let (same, none) = without_secrets("[store]\nurl = \"sqlite:\"\n").unwrap();
        assert_eq!(
            (same.as_str(), none.len()),
            ("[store]\nurl = \"sqlite:\"\n", 0)
        );
        assert!(without_secrets("[api\n").is_err());
        let (moved, note) = without_secrets("store.url = \"sqlite:/srv/g2.db\"\n").unwrap();
        assert!(moved.contains("\"sqlite:\"") && note.len() == 1, "{moved}");
    }
}
