//! Registering a bank connection from its TOML config (SPEC B1): the config is read and checked
//! whole before anything is stored (an ACH identity a NACHA file could not carry, an unknown
//! time zone, a host key that is not an OpenSSH public key line, a missing identity file are
//! refused with the key they concern), the identity key's bytes are sealed under the master key,
//! and the connection is stored with its settings (`domain::connection`).
//!
//! Unknown keys are refused, not ignored: a typo in a bank's config should stop the operator,
//! not send money with a default.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use crate::base::api_key::Scope;
use crate::base::secret_box::SecretBox;
use crate::domain::bank_id::{AbaRoutingNumber, Bic};
use crate::domain::connection::{self, Registered};
use crate::domain::time::Timestamp;
use crate::store::Store;

use super::formats::nacha::field::alpha_text;

/// A connection config as the operator writes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionConfig {
    pub name: String,
    #[serde(default = "default_organization")]
    pub organization: String,
    pub mode: String,
    pub timezone: String,
    pub cutoffs: Vec<String>,
    pub transport: TransportConfig,
    pub ach: Option<AchSettings>,
    pub iso20022: Option<IsoSettings>,
}

fn default_organization() -> String {
    "default".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransportConfig {
    pub kind: String,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub identity_file: Option<PathBuf>,
    pub host_key: Option<String>,
    pub outbound_dir: String,
    pub inbound_dir: String,
}

/// The ACH identities of a connection's NACHA files (SPEC B1, B3).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AchSettings {
    pub immediate_destination: String,
    pub immediate_destination_name: String,
    pub immediate_origin: String,
    pub immediate_origin_name: String,
    pub company_id: String,
    pub company_name: String,
}

/// The ISO 20022 identities of a connection's `pain.001` files.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct IsoSettings {
    pub initiating_party_name: String,
    pub debtor_agent_bic: String,
}

/// How files reach the bank, as stored (the identity key sealed).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TransportSettings {
    Sftp {
        host: String,
        port: u16,
        user: String,
        /// The OpenSSH public key line the bank's server must present.
        host_key: String,
        /// The identity key's bytes, sealed under the master key (base64).
        identity_sealed: String,
        outbound_dir: String,
        inbound_dir: String,
    },
    /// A local folder pair (development): absolute paths.
    Directory { outbound_dir: PathBuf, inbound_dir: PathBuf },
}

/// A connection's settings as stored beside it (never served).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Settings {
    pub timezone: String,
    /// Local cut-off times, `HH:MM`, sorted.
    pub cutoffs: Vec<String>,
    pub transport: TransportSettings,
    pub ach: Option<AchSettings>,
    pub iso20022: Option<IsoSettings>,
}

/// What the sealed identity key is bound to.
pub fn identity_purpose(connection_id: &str) -> String {
    format!("connection_identity:{connection_id}")
}

/// What a rewrap of the connections' identity keys did (`payrail master-key rewrap`, SPEC S4).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RewrappedIdentities {
    /// Sealed afresh under the newest master key.
    pub resealed: usize,
    /// Already sealed under it.
    pub current: usize,
    /// Connections whose identity key is sealed under a master key the file no longer holds.
    pub unreadable: Vec<String>,
}

/// Re-seals every sftp connection's identity key that is not sealed under the newest master key,
/// each a versioned replace of its settings; one that no key of the file opens is named in
/// [`RewrappedIdentities::unreadable`] and left as it is. Other transports hold no key and are
/// not counted.
pub async fn rewrap_identities(store: &dyn Store, secrets: &SecretBox) -> anyhow::Result<RewrappedIdentities> {
    let mut done = RewrappedIdentities::default();
    for registered in connection::all(store).await? {
        let (scope, id) = (&registered.scope, registered.connection.id.as_str());
        let outcome = crate::domain::retry_on_conflict(|| async {
            let Some((json, version)) = connection::settings_versioned(store, scope, id).await? else { return Ok(Resealed::NoKey) };
            let internal = |e: &dyn std::fmt::Display| crate::error::Error::internal(format!("stored settings of connection {id}: {e}"));
            let mut settings: Settings = serde_json::from_str(&json).map_err(|e| internal(&e))?;
            let TransportSettings::Sftp { identity_sealed, .. } = &mut settings.transport else { return Ok(Resealed::NoKey) };
            let sealed = STANDARD.decode(identity_sealed.as_bytes()).map_err(|e| internal(&e))?;
            if secrets.is_current(&sealed) {
                return Ok(Resealed::Current);
            }
            let Ok(identity) = secrets.open(&sealed, &identity_purpose(id)) else { return Ok(Resealed::Unreadable) };
            *identity_sealed = STANDARD.encode(secrets.seal(&identity, &identity_purpose(id)));
            let json = serde_json::to_string(&settings).map_err(|e| internal(&e))?;
            connection::replace_settings(store, scope, &registered.connection, json, version).await?;
            Ok(Resealed::Done)
        })
        .await?;
        match outcome {
            Resealed::Done => done.resealed += 1,
            Resealed::Current => done.current += 1,
            Resealed::Unreadable => done.unreadable.push(id.to_owned()),
            Resealed::NoKey => {}
        }
    }
    Ok(done)
}

enum Resealed {
    Done,
    Current,
    Unreadable,
    /// A `directory` transport: no identity key to seal.
    NoKey,
}

/// Parses and checks a config; relative paths (the identity file, a directory transport's
/// folders) are read against `base_dir`, the config file's folder.
pub fn parse(text: &str) -> anyhow::Result<ConnectionConfig> {
    let config: ConnectionConfig = toml::from_str(text).map_err(|e| anyhow!("the connection config is not valid: {e}"))?;
    check(&config)?;
    Ok(config)
}

fn check(config: &ConnectionConfig) -> anyhow::Result<()> {
    if config.name.trim().is_empty() || config.name.chars().count() > 255 {
        bail!("name: 1 to 255 characters");
    }
    crate::base::api_key::validate_org_id(&config.organization)
        .map_err(|_| anyhow!("organization: 1 to 64 characters of A-Z, a-z, 0-9, - and _ (got {:?})", config.organization))?;
    if !matches!(config.mode.as_str(), "live" | "sandbox") {
        bail!("mode: \"live\" or \"sandbox\" (got {:?})", config.mode);
    }
    jiff::tz::TimeZone::get(&config.timezone)
        .map_err(|_| anyhow!("timezone: {:?} is not a time zone of the tz database", config.timezone))?;
    cutoffs(&config.cutoffs)?;
    if let Some(ach) = &config.ach {
        check_ach(ach)?;
    }
    if let Some(iso) = &config.iso20022 {
        if iso.initiating_party_name.trim().is_empty() || iso.initiating_party_name.chars().count() > 140 {
            bail!("[iso20022] initiating_party_name: 1 to 140 characters");
        }
        Bic::parse("debtor_agent_bic", &iso.debtor_agent_bic)
            .map_err(|_| anyhow!("[iso20022] debtor_agent_bic: not a BIC (8 or 11 characters)"))?;
    }
    Ok(())
}

/// Cut-off times: `HH:MM`, at least one, no repeats; returned sorted.
pub fn cutoffs(given: &[String]) -> anyhow::Result<Vec<String>> {
    if given.is_empty() {
        bail!("cutoffs: at least one local time, such as [\"16:45\"]");
    }
    let mut out = Vec::with_capacity(given.len());
    for text in given {
        let ok = text.len() == 5
            && text.as_bytes()[2] == b':'
            && text[..2].parse::<u8>().is_ok_and(|h| h < 24)
            && text[3..].parse::<u8>().is_ok_and(|m| m < 60);
        if !ok {
            bail!("cutoffs: {text:?} is not a time of day as HH:MM");
        }
        out.push(text.clone());
    }
    out.sort();
    if out.windows(2).any(|w| w[0] == w[1]) {
        bail!("cutoffs: a time is given twice");
    }
    Ok(out)
}

fn check_ach(ach: &AchSettings) -> anyhow::Result<()> {
    AbaRoutingNumber::parse("immediate_destination", &ach.immediate_destination)
        .map_err(|_| anyhow!("[ach] immediate_destination: 9 digits with a valid ABA checksum"))?;
    let origin = ach.immediate_origin.as_str();
    if !(origin.len() == 10 || origin.len() == 9) || !origin.chars().all(|c| c.is_ascii_alphanumeric()) {
        bail!("[ach] immediate_origin: 10 characters as the bank assigned them (or 9 digits)");
    }
    if ach.company_id.len() != 10 || !ach.company_id.chars().all(|c| c.is_ascii_alphanumeric()) {
        bail!("[ach] company_id: exactly 10 letters and digits");
    }
    for (key, value, width) in [
        ("immediate_destination_name", &ach.immediate_destination_name, 23),
        ("immediate_origin_name", &ach.immediate_origin_name, 23),
        ("company_name", &ach.company_name, 16),
    ] {
        if value.trim().is_empty() {
            bail!("[ach] {key}: required");
        }
        alpha_text("connection", "ach", value, width).map_err(|e| anyhow!("[ach] {key}: {e} (at most {width} NACHA characters)"))?;
    }
    Ok(())
}

/// The transport's stored settings, the identity key read from its file and sealed.
fn transport(config: &TransportConfig, base_dir: &Path, connection_id: &str, secrets: &SecretBox) -> anyhow::Result<TransportSettings> {
    match config.kind.as_str() {
        "sftp" => {
            let need = |value: &Option<String>, key: &str| {
                value.clone().filter(|v| !v.is_empty()).ok_or_else(|| anyhow!("[transport] {key}: required for sftp"))
            };
            let host_key = need(&config.host_key, "host_key")?;
            check_host_key(&host_key)?;
            let identity_file = config.identity_file.as_ref().ok_or_else(|| anyhow!("[transport] identity_file: required for sftp"))?;
            let path = base_dir.join(identity_file);
            let identity = std::fs::read(&path).with_context(|| format!("[transport] identity_file: cannot read {}", path.display()))?;
            if !String::from_utf8_lossy(&identity).contains("PRIVATE KEY") {
                bail!("[transport] identity_file: {} is not a private key in OpenSSH or PEM form", path.display());
            }
            Ok(TransportSettings::Sftp {
                host: need(&config.host, "host")?,
                port: match config.port {
                    Some(0) => bail!("[transport] port: 1 to 65535 (0 is no port a server listens on)"),
                    port => port.unwrap_or(22),
                },
                user: need(&config.user, "user")?,
                host_key,
                identity_sealed: STANDARD.encode(secrets.seal(&identity, &identity_purpose(connection_id))),
                outbound_dir: config.outbound_dir.clone(),
                inbound_dir: config.inbound_dir.clone(),
            })
        }
        "directory" => {
            // A key of the other kind is a config mixed up, not a detail to drop in silence.
            let sftp_only = [
                ("host", config.host.is_some()),
                ("port", config.port.is_some()),
                ("user", config.user.is_some()),
                ("identity_file", config.identity_file.is_some()),
                ("host_key", config.host_key.is_some()),
            ];
            if let Some((key, _)) = sftp_only.iter().find(|(_, given)| *given) {
                bail!("[transport] {key}: only kind = \"sftp\" takes it (this transport is a local folder pair)");
            }
            let folder = |dir: &str| -> anyhow::Result<PathBuf> {
                let path = base_dir.join(dir);
                std::fs::create_dir_all(&path).with_context(|| format!("[transport] cannot create {}", path.display()))?;
                path.canonicalize().with_context(|| format!("[transport] cannot resolve {}", path.display()))
            };
            Ok(TransportSettings::Directory { outbound_dir: folder(&config.outbound_dir)?, inbound_dir: folder(&config.inbound_dir)? })
        }
        other => bail!("[transport] kind: \"sftp\" or \"directory\" (got {other:?})"),
    }
}

/// An OpenSSH public key line: `TYPE BASE64 [comment]`.
fn check_host_key(line: &str) -> anyhow::Result<()> {
    let mut parts = line.split_whitespace();
    let (Some(kind), Some(body)) = (parts.next(), parts.next()) else {
        bail!("[transport] host_key: an OpenSSH public key line, such as \"ssh-ed25519 AAAA...\"")
    };
    let known = ["ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521"];
    if !known.contains(&kind) || STANDARD.decode(body).is_err() {
        bail!("[transport] host_key: an OpenSSH public key line of type {} (got {kind:?})", known.join(", "));
    }
    Ok(())
}

/// Registers the connection `text` describes (`payrail connections add`); `base_dir` is the
/// config file's folder.
pub async fn add(store: &dyn Store, secrets: &SecretBox, text: &str, base_dir: &Path, now: Timestamp) -> anyhow::Result<Registered> {
    let config = parse(text)?;
    let scope = Scope { organization_id: config.organization.clone(), live_mode: config.mode == "live" };
    let vendor_customer_id = config.ach.as_ref().map(|a| a.company_id.clone());
    let record = connection::new_record(scope.live_mode, &config.transport.kind, &config.name, vendor_customer_id, now);
    let settings = Settings {
        timezone: config.timezone.clone(),
        cutoffs: cutoffs(&config.cutoffs)?,
        transport: transport(&config.transport, base_dir, &record.id, secrets)?,
        ach: config.ach.clone(),
        iso20022: config.iso20022.clone(),
    };
    let settings_json = serde_json::to_string(&settings)?;
    connection::register(store, &scope, &record, settings_json).await?;
    Ok(Registered { scope, connection: record })
}

/// Whether `registered` is an organization's built-in sandbox connection (SPEC B7).
pub fn is_builtin_sandbox(registered: &Registered) -> bool {
    connection::is_builtin(&registered.scope, &registered.connection.id)
}

/// The folder pair of a built-in sandbox connection: under the data directory, where the
/// sandbox bank (`sandbox/`) reads what Payrail sends and leaves its answers.
pub fn sandbox_folders(data_dir: &Path, connection_id: &str) -> (PathBuf, PathBuf) {
    let root = data_dir.join("sandbox-bank").join(connection_id);
    (root.join("outbound"), root.join("inbound"))
}

/// The settings of a built-in sandbox connection: files go to its folder pair (SPEC B7) with
/// the sandbox bank's identities (its routing number, Payrail's sandbox BIC); no cut-off times,
/// since the sandbox bank takes orders as they become due.
pub fn sandbox_settings(data_dir: &Path, connection_id: &str) -> Settings {
    let (outbound_dir, inbound_dir) = sandbox_folders(data_dir, connection_id);
    let (ach, iso20022) = sandbox_identities();
    Settings {
        timezone: SANDBOX_TIMEZONE.into(),
        cutoffs: Vec::new(),
        transport: TransportSettings::Directory { outbound_dir, inbound_dir },
        ach: Some(ach),
        iso20022: Some(iso20022),
    }
}

/// The sandbox bank's identities in its files: its routing number and Payrail's sandbox BIC.
pub fn sandbox_identities() -> (AchSettings, IsoSettings) {
    let ach = AchSettings {
        immediate_destination: crate::domain::internal_account::SANDBOX_ROUTING_NUMBER.into(),
        immediate_destination_name: "PAYRAIL SANDBOX BANK".into(),
        immediate_origin: "1000000000".into(),
        immediate_origin_name: "PAYRAIL SANDBOX".into(),
        company_id: "1000000000".into(),
        company_name: "PAYRAIL SANDBOX".into(),
    };
    (ach, IsoSettings { initiating_party_name: "PAYRAIL SANDBOX".into(), debtor_agent_bic: SANDBOX_BIC.into() })
}

/// The time zone of a built-in sandbox connection.
pub const SANDBOX_TIMEZONE: &str = "America/New_York";

/// The sandbox bank's BIC in its files.
pub const SANDBOX_BIC: &str = "PAYRUS33XXX";

/// A connection's settings: the stored ones, or a built-in sandbox connection's.
pub async fn settings_for(store: &dyn Store, data_dir: &Path, registered: &Registered) -> anyhow::Result<Settings> {
    if is_builtin_sandbox(registered) {
        return Ok(sandbox_settings(data_dir, &registered.connection.id));
    }
    settings(store, registered).await
}

/// A connection's stored settings.
pub async fn settings(store: &dyn Store, registered: &Registered) -> anyhow::Result<Settings> {
    Ok(stored_settings(store, &registered.scope, &registered.connection.id).await?)
}

/// The stored settings of connection `id` of `scope`; a registered connection always has them.
pub async fn stored_settings(store: &dyn Store, scope: &Scope, id: &str) -> crate::error::Result<Settings> {
    let json = connection::settings(store, scope, id)
        .await?
        .ok_or_else(|| crate::error::Error::internal(format!("connection {id} has no settings")))?;
    serde_json::from_str(&json).map_err(|e| crate::error::Error::internal(format!("stored settings of connection {id}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SFTP: &str = r#"
name = "Acme Bank"
organization = "default"
mode = "live"
timezone = "America/New_York"
cutoffs = ["16:45", "10:30", "14:30"]
[transport]
kind = "sftp"
host = "127.0.0.1"
port = 2222
user = "payrail"
identity_file = "bank_ed25519"
host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
outbound_dir = "outbound"
inbound_dir = "inbound"
[ach]
immediate_destination = "021000021"
immediate_destination_name = "ACME BANK"
immediate_origin = "1234567890"
immediate_origin_name = "ACME CORP"
company_id = "1234567890"
company_name = "ACME CORP"
[iso20022]
initiating_party_name = "ACME CORP"
debtor_agent_bic = "ACMEUS33XXX"
"#;

    #[test]
    fn b1_the_spec_example_parses() {
        let config = parse(SFTP).unwrap();
        assert_eq!(cutoffs(&config.cutoffs).unwrap(), ["10:30", "14:30", "16:45"]);
    }

    #[test]
    fn b1_bad_configs_name_the_key() {
        let cases = [
            (SFTP.replace("America/New_York", "Mars/Olympus"), "timezone"),
            (SFTP.replace("\"16:45\"", "\"25:00\""), "cutoffs"),
            (SFTP.replace("021000021", "021000022"), "immediate_destination"),
            (SFTP.replace("company_id = \"1234567890\"", "company_id = \"123\""), "company_id"),
            (SFTP.replace("ACMEUS33XXX", "nope"), "debtor_agent_bic"),
            (SFTP.replace("mode = \"live\"", "mode = \"production\""), "mode"),
            (SFTP.replace("port = 2222", "port = 2222\nfavourite_colour = \"blue\""), "favourite_colour"),
        ];
        for (text, key) in cases {
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains(key), "{key}: {err}");
        }
    }

    /// Found by the README audit: a directory transport took sftp-only keys in silence.
    #[test]
    fn b1_a_directory_transport_refuses_sftp_only_keys() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = SecretBox::from_keys(&[[7u8; 32]]);
        let config = |extra: &str| TransportConfig {
            kind: "directory".into(),
            host: (extra == "host").then(|| "h".into()),
            port: (extra == "port").then_some(22),
            user: None,
            identity_file: None,
            host_key: None,
            outbound_dir: "outbound".into(),
            inbound_dir: "inbound".into(),
        };
        assert!(transport(&config(""), dir.path(), "c", &secrets).is_ok());
        for key in ["host", "port"] {
            let err = transport(&config(key), dir.path(), "c", &secrets).unwrap_err().to_string();
            assert!(err.contains(key) && err.contains("sftp"), "{key}: {err}");
        }
    }
}
