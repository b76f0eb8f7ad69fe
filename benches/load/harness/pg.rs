//! PostgreSQL helpers: a connection, and the throwaway databases a run creates and drops.

use super::BoxResult;

pub async fn pg_connect(url: &str) -> BoxResult<tokio_postgres::Client> {
    let (client, connection) =
        tokio_postgres::connect(url, tokio_postgres::NoTls).await.map_err(|e| format!("connecting to PostgreSQL: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// The same server URL naming another database.
fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[after_scheme..].find('/').map_or(base.len(), |i| after_scheme + i);
    let query = query.map(|q| format!("?{q}")).unwrap_or_default();
    format!("{}/{db}{query}", &base[..authority_end])
}

pub async fn pg_create_database(admin_url: &str, name: &str) -> BoxResult<String> {
    let admin = pg_connect(admin_url).await?;
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.map_err(|e| format!("CREATE DATABASE {name}: {e}"))?;
    Ok(with_database(admin_url, name))
}

pub async fn pg_drop_database(admin_url: &str, name: &str) {
    match pg_connect(admin_url).await {
        Ok(admin) => {
            if let Err(e) = admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await {
                eprintln!("bench: dropping database {name}: {e}");
            }
        }
        Err(e) => eprintln!("bench: dropping database {name}: {e}"),
    }
}
