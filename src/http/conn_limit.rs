//! Connection caps (SPEC T4): at most `--connections-max` connections open at once, and at most
//! `--connections-per-address-max` from one client, counted from accept to close (a connection
//! still in its TLS handshake counts). A connection over either cap is closed as soon as it is
//! accepted, and counted in `/metrics` by the cap it hit.
//!
//! A client is its IPv4 address, or its IPv6 /64: one host is routinely given a whole /64 and
//! can pick any address in it, so capping single IPv6 addresses would cap nothing. An
//! IPv4-mapped IPv6 address (a dual-stack listener) counts as the IPv4 address it carries.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

use crate::app::metrics::{Metrics, Refusal};

/// The caps and the connections open, by client.
pub struct ConnectionLimits {
    global_max: usize,
    per_client_max: usize,
    metrics: Arc<Metrics>,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    total: usize,
    /// Only clients with a connection open: the map never outgrows the global cap.
    by_client: HashMap<IpAddr, usize>,
}

/// A connection's place under the caps, given back when dropped (when the connection closes).
pub struct Slot {
    limits: Arc<ConnectionLimits>,
    client: IpAddr,
}

impl ConnectionLimits {
    pub fn new(global_max: usize, per_client_max: usize, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(ConnectionLimits { global_max, per_client_max, metrics, open: Mutex::default() })
    }

    /// Admits a connection from `peer`, or says which cap refuses it (and counts the refusal).
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Slot, Refusal> {
        let client = client_of(peer);
        let refused = {
            let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
            let from_client = open.by_client.get(&client).copied().unwrap_or(0);
            // A full server is the global cap, even when one client fills it (the per-address
            // cap is never above the global one, so that client is at both).
            if open.total >= self.global_max {
                Some(Refusal::GlobalCap)
            } else if from_client >= self.per_client_max {
                Some(Refusal::PerAddressCap)
            } else {
                open.total += 1;
                open.by_client.insert(client, from_client + 1);
                None
            }
        };
        if let Some(why) = refused {
            self.metrics.connection_refused(why);
            return Err(why);
        }
        self.metrics.connection_opened();
        Ok(Slot { limits: self.clone(), client })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.limits.open.lock().unwrap_or_else(|p| p.into_inner());
        open.total = open.total.saturating_sub(1);
        if let Some(count) = open.by_client.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                open.by_client.remove(&self.client);
            }
        }
        drop(open);
        self.limits.metrics.connection_closed();
    }
}

/// The client a peer address counts as: the IPv4 address, or the IPv6 /64.
fn client_of(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn t4_clients_are_ipv4_addresses_and_ipv6_slash_64s() {
        assert_eq!(client_of(ip("203.0.113.7")), ip("203.0.113.7"));
        assert_eq!(client_of(ip("2001:db8:1:2:aaaa:bbbb:cccc:dddd")), ip("2001:db8:1:2::"));
        assert_eq!(client_of(ip("2001:db8:1:2::1")), client_of(ip("2001:db8:1:2:ffff::9")), "one /64 is one client");
        assert_ne!(client_of(ip("2001:db8:1:2::1")), client_of(ip("2001:db8:1:3::1")), "another /64 is another client");
        assert_eq!(client_of(ip("::ffff:203.0.113.7")), ip("203.0.113.7"), "IPv4-mapped counts as IPv4");
    }

    #[test]
    fn t4_caps_refuse_by_reason_and_slots_come_back() {
        let metrics = Arc::new(Metrics::default());
        let limits = ConnectionLimits::new(3, 2, metrics.clone());
        let a1 = limits.admit(ip("10.0.0.1")).unwrap();
        let a2 = limits.admit(ip("10.0.0.1")).unwrap();
        assert_eq!(limits.admit(ip("10.0.0.1")).err(), Some(Refusal::PerAddressCap));
        let b1 = limits.admit(ip("10.0.0.2")).unwrap();
        assert_eq!(limits.admit(ip("10.0.0.3")).err(), Some(Refusal::GlobalCap));
        drop(a1);
        let a3 = limits.admit(ip("10.0.0.1")).expect("a closed connection frees its slot");
        drop((a2, a3, b1));
        // One client filling the whole server: the global cap is what refuses the next one.
        let alone = ConnectionLimits::new(2, 2, metrics.clone());
        let held = (alone.admit(ip("10.0.0.9")).unwrap(), alone.admit(ip("10.0.0.9")).unwrap());
        assert_eq!(alone.admit(ip("10.0.0.9")).err(), Some(Refusal::GlobalCap), "the server is full");
        drop(held);
        assert_eq!(limits.open.lock().unwrap().total, 0);
        assert!(limits.open.lock().unwrap().by_client.is_empty(), "clients with nothing open are forgotten");
        let text = metrics.render();
        assert!(text.contains("reason=\"per_address_cap\"} 1"), "{text}");
        assert!(text.contains("reason=\"global_cap\"} 2"), "{text}");
        assert!(text.contains("payrail_connections_open 0"), "{text}");
    }
}
