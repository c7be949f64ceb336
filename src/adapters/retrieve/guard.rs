//! The address guard of the web fetcher: which IP addresses a fetch may connect to. Only
//! public unicast addresses pass; private (10/8, 172.16/12, 192.168/16), shared (100.64/10),
//! loopback, link-local (169.254/16 with the cloud metadata address, fe80::/10), unique-local
//! (fc00::/7), unspecified, multicast, broadcast, documentation and reserved ranges are
//! refused, and so are the IPv6 forms that carry an IPv4 address (mapped, compatible, NAT64,
//! 6to4) when that address would be. Pure; `http` asks it for every address of every hop.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Whether a fetch may connect to `ip`.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let refused = a == 0 // "this network", 0.0.0.0 included
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b)) // shared address space (carrier NAT)
        || (a == 169 && b == 254) // link-local, the metadata address included
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2) // documentation
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || a >= 224; // multicast, reserved, broadcast
    !refused
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if let Some(v4) = embedded_v4(ip) {
        return is_public_v4(v4);
    }
    let refused = ip.is_unspecified()
        || ip.is_loopback()
        || (s[0] & 0xffc0) == 0xfe80 // link-local
        || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
        || (s[0] & 0xfe00) == 0xfc00 // unique local
        || (s[0] & 0xff00) == 0xff00 // multicast
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x2001 && s[1] == 0) // Teredo
        || (s[0] == 0x0100 && s[1] == 0 && s[2] == 0 && s[3] == 0); // discard
    !refused
}

/// The IPv4 address an IPv6 address stands for: mapped (`::ffff:a.b.c.d`), compatible
/// (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) or 6to4 (`2002:aabb:ccdd::`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let o = ip.octets();
    let low = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    if s[..5] == [0; 5]
        && (s[5] == 0xffff || (s[5] == 0 && !ip.is_loopback() && !ip.is_unspecified()))
    {
        return Some(low);
    }
    if s[0] == 0x0064 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        return Some(low);
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    None
}

/// Whether a fetch may connect to `addr`: a public address, or one of `allowed` exactly (the
/// tests' local server; never set from configuration).
pub fn may_connect(addr: SocketAddr, allowed: &[SocketAddr]) -> bool {
    is_public(addr.ip()) || allowed.contains(&addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    /// Every range the fetcher must never reach is refused, in both families and in the
    /// IPv6 forms that carry an IPv4 address; ordinary public addresses pass.
    #[test]
    fn only_public_addresses_pass() {
        for bad in [
            "0.0.0.0",
            "10.0.0.1",
            "10.255.255.255",
            "127.0.0.1",
            "127.1.2.3",
            "100.64.0.1",
            "100.127.255.254",
            "169.254.169.254",
            "169.254.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "192.0.0.8",
            "192.0.2.1",
            "198.18.0.1",
            "224.0.0.1",
            "239.255.255.250",
            "255.255.255.255",
            "::",
            "::1",
            "fe80::1",
            "febf::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
            "2002:0a00:0001::1",
            "2001:db8::1",
        ] {
            assert!(!is_public(ip(bad)), "{bad} passed");
        }
        for good in [
            "93.184.216.34",
            "8.8.8.8",
            "1.1.1.1",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "169.253.0.1",
            "2606:4700:4700::1111",
            "2a00:1450:4001:80b::200e",
            "::ffff:93.184.216.34",
        ] {
            assert!(is_public(ip(good)), "{good} refused");
        }
    }

    /// The tests' allowance is one exact address and port: another port on loopback is not.
    #[test]
    fn the_allowance_is_exact() {
        let server: SocketAddr = "127.0.0.1:4000".parse().unwrap_or_else(|e| panic!("{e}"));
        let other: SocketAddr = "127.0.0.1:4001".parse().unwrap_or_else(|e| panic!("{e}"));
        assert!(may_connect(server, &[server]));
        assert!(!may_connect(other, &[server]));
        assert!(!may_connect(server, &[]));
    }
}
