//! The egress policy: where Hero's own requests may go. Every outbound request (today, the
//! provider calls) is sent by the one client made here, [`EgressPolicy::client`], and only to
//! a [`PublicUrl`], which only [`Outbound::check`] makes.
//!
//! Without the policy any user could point an agent at loopback, the LAN, link-local or the
//! cloud metadata address and read what came back: a port scanner with the server's view of
//! the network. So an address in a range that is not the public internet ([`classify`]) is
//! refused unless an administrator allowed the exact host and port (`egress_allow` in
//! hero.toml, `HERO_EGRESS_ALLOW`).
//!
//! The check runs twice, because hyper asks a resolver only for names:
//! - on the URL before each request ([`EgressPolicy::check`]): its form (http or https, a
//!   host, no user name, query or fragment) and, when the host is an IP literal, the address.
//!   The `url` crate's WHATWG parser has already turned `2130706433`, `0x7f.1`, `0177.0.0.1`
//!   and `127.1` into `127.0.0.1`, and `[::ffff:127.0.0.1]` into `[::ffff:7f00:1]`.
//! - on every address a name resolves to, at connect time, by the client's own resolver
//!   ([`screen`]): the address connected to is the address checked, so a name
//!   that resolves inside, or changes its answer between a check and the connect (DNS
//!   rebinding), is refused.
//!
//! Redirects are not followed and no proxy is used (an `HTTP_PROXY` in the environment would
//! make the proxy resolve the name, out of the resolver's sight).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;

/// The setting an administrator allows an address with, named in every refusal.
pub const ALLOW_SETTING: &str = "HERO_EGRESS_ALLOW";

/// How long a connection may take to open; the first byte's wait is the caller's.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A host as the policy compares it: an address, or a name as the URL parser wrote it
/// (lowercase, IDNA applied).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    Ip(IpAddr),
    Name(String),
}

impl Host {
    /// The host of a parsed URL. The parser has normalised every IPv4 form to dotted decimal
    /// and wraps IPv6 in brackets; anything else is a name.
    fn of(url: &Url) -> Option<Host> {
        let h = url.host_str()?;
        if let Some(v6) = h.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            return v6.parse::<Ipv6Addr>().ok().map(|a| Host::Ip(IpAddr::V6(a)));
        }
        Some(match h.parse::<Ipv4Addr>() {
            Ok(a) => Host::Ip(IpAddr::V4(a)),
            Err(_) => Host::Name(h.to_ascii_lowercase()),
        })
    }
}

/// Which addresses outbound requests may reach besides the public internet: exact
/// (host, port) pairs an administrator named.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressPolicy {
    allow: Vec<(Host, u16)>,
}

/// An `egress_allow` entry that is not `HOST:PORT`; start-up stops with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "egress allow entry \"{entry}\" {problem}; write HOST:PORT, for example 127.0.0.1:11434 or [::1]:11434"
)]
pub struct BadAllowEntry {
    entry: String,
    problem: &'static str,
}

impl EgressPolicy {
    /// The policy with these `HOST:PORT` entries allowed. The host is matched as the URL
    /// parser writes it, so `LOCALHOST:11434` allows `http://localhost:11434` and
    /// `0x7f.1:80` allows `http://127.0.0.1`.
    pub fn new<S: AsRef<str>>(
        entries: impl IntoIterator<Item = S>,
    ) -> Result<EgressPolicy, BadAllowEntry> {
        let allow = entries
            .into_iter()
            .map(|e| parse_entry(e.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(EgressPolicy { allow })
    }

    /// [`EgressPolicy::new`] over a comma-separated list, as `HERO_EGRESS_ALLOW` holds it.
    pub fn parse_list(list: &str) -> Result<EgressPolicy, BadAllowEntry> {
        EgressPolicy::new(list.split(',').map(str::trim).filter(|e| !e.is_empty()))
    }

    /// Allows one more socket address (tests allow the mock LLM's with this).
    pub fn allowing(mut self, addr: SocketAddr) -> EgressPolicy {
        self.allow.push((Host::Ip(addr.ip()), addr.port()));
        self
    }

    /// The allowed entries, as `HOST:PORT`.
    pub fn allowed(&self) -> Vec<String> {
        self.allow
            .iter()
            .map(|(h, p)| match h {
                Host::Ip(ip) => SocketAddr::new(*ip, *p).to_string(),
                Host::Name(n) => format!("{n}:{p}"),
            })
            .collect()
    }

    fn allows(&self, host: &Host, port: u16) -> bool {
        self.allow.iter().any(|(h, p)| h == host && *p == port)
    }

    /// Whether `name` is allowed on some port. A resolver is not told the port: only the
    /// client of allowed requests asks this, and [`EgressPolicy::check`] sends it only URLs
    /// whose name and port an administrator allowed together.
    fn allows_name(&self, name: &str) -> bool {
        self.allow
            .iter()
            .any(|(h, _)| matches!(h, Host::Name(n) if n.eq_ignore_ascii_case(name)))
    }

    /// Parses `url` and checks it: its form, and, when its host is an IP literal, the
    /// address. A name passes here and is checked on what it resolves to, at connect time;
    /// it may resolve inside only if an administrator allowed it with this very port.
    pub fn check(&self, url: &str) -> Result<PublicUrl, UrlError> {
        let form = BaseUrl::parse(url)?;
        let host = Host::of(&form.0).ok_or(UrlError::Scheme)?;
        let port = form.0.port_or_known_default().ok_or(UrlError::Scheme)?;
        let allowed = self.allows(&host, port);
        if let Host::Ip(ip) = &host
            && let Some(reason) = classify(*ip)
            && !allowed
        {
            return Err(UrlError::Refused(Refused {
                subject: SocketAddr::new(*ip, port).to_string(),
                reason,
                resolved: false,
            }));
        }
        Ok(PublicUrl {
            url: form.0,
            allowed,
        })
    }

    /// [`EgressPolicy::check`] for a page or an API that takes a query (web search): the
    /// same rules, the query kept, a fragment dropped (it never leaves a browser either).
    pub fn check_with_query(&self, url: &str) -> Result<PublicUrl, UrlError> {
        let mut parsed = Url::parse(url.trim()).map_err(|e| UrlError::NotAUrl(e.to_string()))?;
        parsed.set_fragment(None);
        let query = parsed.query().map(str::to_owned);
        parsed.set_query(None);
        let mut ok = self.check(parsed.as_str())?;
        ok.url.set_query(query.as_deref());
        Ok(ok)
    }

    /// The one outbound client: this policy's resolvers, no redirects, no proxy.
    ///
    /// Two connection pools behind it: one whose resolver keeps only public addresses, for
    /// every request but those to an allowed (host, port), and one whose resolver also keeps
    /// the refused addresses of allowed names, for those alone.
    pub fn client(&self) -> crate::Result<Outbound> {
        let policy = Arc::new(self.clone());
        let build = |relaxed| {
            reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .dns_resolver(Arc::new(Resolver {
                    policy: policy.clone(),
                    relaxed,
                }))
                // A redirect would carry the key header to whatever host it names, past the
                // check of the URL.
                .redirect(reqwest::redirect::Policy::none())
                // A proxy would resolve and connect in our place, out of the resolver's sight.
                .no_proxy()
                .build()
                .map_err(|e| {
                    crate::Error::Internal(format!("cannot build the outbound HTTP client: {e}"))
                })
        };
        Ok(Outbound {
            public: build(false)?,
            allowed: build(true)?,
            policy: policy.clone(),
        })
    }
}

/// What a resolver keeps of the addresses `name` resolved to: the public ones, or all of
/// them when an administrator allowed the name (`allowed`). Nothing left is a refusal naming
/// the first refused address's class, not the address: what internal names resolve to is
/// the server's to know.
pub fn screen(
    name: &str,
    addrs: impl IntoIterator<Item = SocketAddr>,
    allowed: bool,
) -> Result<Vec<SocketAddr>, Refused> {
    let mut first_refused = None;
    let kept: Vec<SocketAddr> = addrs
        .into_iter()
        .filter(|a| match classify(a.ip()) {
            None => true,
            Some(_) if allowed => true,
            Some(reason) => {
                first_refused.get_or_insert(reason);
                false
            }
        })
        .collect();
    match (kept.is_empty(), first_refused) {
        (true, Some(reason)) => Err(Refused {
            subject: name.to_owned(),
            reason,
            resolved: true,
        }),
        _ => Ok(kept),
    }
}

fn parse_entry(entry: &str) -> Result<(Host, u16), BadAllowEntry> {
    let bad = |problem| BadAllowEntry {
        entry: entry.to_owned(),
        problem,
    };
    let (host, port) = entry.trim().rsplit_once(':').ok_or(bad("has no port"))?;
    let port: u16 = port
        .parse()
        .ok()
        .filter(|p| *p != 0)
        .ok_or(bad("has no valid port"))?;
    if host.is_empty() {
        return Err(bad("has no host"));
    }
    if host.contains(':') && !host.starts_with('[') {
        return Err(bad("has an IPv6 address without brackets"));
    }
    if host.contains(['/', '@', '?', '#', '\\']) || host.chars().any(char::is_whitespace) {
        return Err(bad("is not a host and port"));
    }
    let url = Url::parse(&format!("http://{host}/")).map_err(|_| bad("has an invalid host"))?;
    let host = Host::of(&url).ok_or(bad("has an invalid host"))?;
    Ok((host, port))
}

/// Why an address is refused: the range it lies in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// `0.0.0.0`, `::`: "this host" on any interface.
    Unspecified,
    /// `0.0.0.0/8` ("this network").
    ThisNetwork,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `10/8`, `172.16/12`, `192.168/16`.
    Private,
    /// `100.64.0.0/10`, carrier-grade NAT's shared space.
    SharedNat,
    /// `169.254/16` (the cloud metadata service is `169.254.169.254`), `fe80::/10`.
    LinkLocal,
    /// `192.0.2/24`, `198.51.100/24`, `203.0.113/24`, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// `198.18.0.0/15`, `2001:2::/48`.
    Benchmarking,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// Special-purpose and unassigned space: `192.0.0/24`, `192.88.99/24`, `240/4`,
    /// `2001::/23`, and every IPv6 address outside global unicast `2000::/3`.
    Reserved,
    /// `fc00::/7`, unique local IPv6.
    UniqueLocal,
    /// `fec0::/10`, deprecated site-local IPv6.
    SiteLocal,
    /// An IPv6 address that carries an IPv4 one. Mapped and compatible forms are always
    /// refused (nobody needs them in a URL: write the IPv4 address); NAT64 and 6to4 only
    /// when the address inside is refused.
    Embedded { form: Embedding, inner: Ipv4Addr },
}

/// How an IPv6 address carries an IPv4 one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Embedding {
    /// `::ffff:0:0/96`.
    Mapped,
    /// `::/96` (deprecated).
    Compatible,
    /// `64:ff9b::/96`.
    Nat64,
    /// `2002::/16`.
    SixToFour,
}

impl Reason {
    /// A short name of the class (tests compare these).
    pub fn label(&self) -> String {
        match self {
            Reason::Unspecified => "unspecified".into(),
            Reason::ThisNetwork => "this-network".into(),
            Reason::Loopback => "loopback".into(),
            Reason::Private => "private".into(),
            Reason::SharedNat => "cgnat".into(),
            Reason::LinkLocal => "link-local".into(),
            Reason::Documentation => "documentation".into(),
            Reason::Benchmarking => "benchmarking".into(),
            Reason::Multicast => "multicast".into(),
            Reason::Broadcast => "broadcast".into(),
            Reason::Reserved => "reserved".into(),
            Reason::UniqueLocal => "ula".into(),
            Reason::SiteLocal => "site-local".into(),
            Reason::Embedded { form, inner } => format!(
                "{}({})",
                form.label(),
                classify_v4(*inner).map_or("public".into(), |r| r.label())
            ),
        }
    }
}

impl Embedding {
    fn label(&self) -> &'static str {
        match self {
            Embedding::Mapped => "mapped",
            Embedding::Compatible => "compatible",
            Embedding::Nat64 => "nat64",
            Embedding::SixToFour => "6to4",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reason::Unspecified => "an unspecified address",
            Reason::ThisNetwork => "a \"this network\" address",
            Reason::Loopback => "a loopback address",
            Reason::Private => "a private address",
            Reason::SharedNat => "a carrier-grade NAT address",
            Reason::LinkLocal => "a link-local address",
            Reason::Documentation => "a documentation address",
            Reason::Benchmarking => "a benchmarking address",
            Reason::Multicast => "a multicast address",
            Reason::Broadcast => "the broadcast address",
            Reason::Reserved => "a reserved address",
            Reason::UniqueLocal => "a unique local (private) IPv6 address",
            Reason::SiteLocal => "a site-local IPv6 address",
            Reason::Embedded { form, inner } => {
                let form = match form {
                    Embedding::Mapped => "an IPv4-mapped",
                    Embedding::Compatible => "an IPv4-compatible",
                    Embedding::Nat64 => "a NAT64",
                    Embedding::SixToFour => "a 6to4",
                };
                return match classify_v4(*inner) {
                    Some(r) => write!(f, "{form} IPv6 form of {inner}, {r}"),
                    None => write!(f, "{form} IPv6 form of {inner}; use {inner} itself"),
                };
            }
        })
    }
}

/// Why `ip` is refused, or `None` for an address of the public internet.
pub fn classify(ip: IpAddr) -> Option<Reason> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<Reason> {
    if ip.is_unspecified() {
        return Some(Reason::Unspecified);
    }
    if ip.is_broadcast() {
        return Some(Reason::Broadcast);
    }
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, _, _) => Reason::ThisNetwork,
        (10, _, _) | (172, 16..=31, _) | (192, 168, _) => Reason::Private,
        (100, 64..=127, _) => Reason::SharedNat,
        (127, _, _) => Reason::Loopback,
        (169, 254, _) => Reason::LinkLocal,
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Reason::Documentation,
        // IETF protocol assignments; the old 6to4 relay anycast.
        (192, 0, 0) | (192, 88, 99) => Reason::Reserved,
        (198, 18..=19, _) => Reason::Benchmarking,
        (224..=239, _, _) => Reason::Multicast,
        (240..=255, _, _) => Reason::Reserved,
        _ => return None,
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<Reason> {
    if ip.is_unspecified() {
        return Some(Reason::Unspecified);
    }
    if ip.is_loopback() {
        return Some(Reason::Loopback);
    }
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    let embedded = |form, inner| Reason::Embedded { form, inner };
    if let Some(inner) = ip.to_ipv4_mapped() {
        return Some(embedded(Embedding::Mapped, inner));
    }
    if s[..6] == [0; 6] {
        return Some(embedded(Embedding::Compatible, v4(s[6], s[7])));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let inner = v4(s[6], s[7]);
        return classify_v4(inner).map(|_| embedded(Embedding::Nat64, inner));
    }
    if s[0] == 0x2002 {
        let inner = v4(s[1], s[2]);
        return classify_v4(inner).map(|_| embedded(Embedding::SixToFour, inner));
    }
    Some(match s[0] {
        0xff00..=0xffff => Reason::Multicast,
        0xfe80..=0xfebf => Reason::LinkLocal,
        0xfec0..=0xfeff => Reason::SiteLocal,
        0xfc00..=0xfdff => Reason::UniqueLocal,
        0x2001 if s[1] == 0x0db8 => Reason::Documentation,
        0x3fff if s[1] < 0x1000 => Reason::Documentation,
        0x2001 if s[1] == 0x0002 && s[2] == 0 => Reason::Benchmarking,
        // IETF protocol assignments (Teredo, ORCHID and the like).
        0x2001 if s[1] < 0x0200 => Reason::Reserved,
        // Outside global unicast: unassigned, discard-only 100::/64, local NAT64 64:ff9b:1::/48.
        first if first & 0xe000 != 0x2000 => Reason::Reserved,
        _ => return None,
    })
}

/// A URL of the right form: http or https, a host, no user name or password, no query, no
/// fragment. What an agent's base URL must be when it is saved; its address is checked when
/// it is called ([`EgressPolicy::check`]), against the policy in force then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl(Url);

impl BaseUrl {
    pub fn parse(url: &str) -> Result<BaseUrl, UrlError> {
        let parsed = Url::parse(url.trim()).map_err(|e| UrlError::NotAUrl(e.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
            return Err(UrlError::Scheme);
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(UrlError::UserInfo);
        }
        if parsed.query().is_some() {
            return Err(UrlError::Query);
        }
        if parsed.fragment().is_some() {
            return Err(UrlError::Fragment);
        }
        Ok(BaseUrl(parsed))
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

/// A URL the policy lets a request go to: made only by [`EgressPolicy::check`], taken by
/// [`Outbound::post`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    url: Url,
    /// An administrator allowed its host and port: it goes through the client whose
    /// resolver keeps refused addresses of allowed names.
    allowed: bool,
}

impl PublicUrl {
    pub fn as_str(&self) -> &str {
        self.url.as_str()
    }

    /// Whether an administrator allowed its host and port.
    pub fn is_allowed(&self) -> bool {
        self.allowed
    }

    /// `host` or `host:port`, for messages (the URL holds no credentials: the form check
    /// refused them).
    pub fn authority(&self) -> String {
        match (self.url.host_str(), self.url.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_owned(),
            _ => String::new(),
        }
    }
}

/// Why a URL may not be called; each says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("base_url is not a URL ({0})")]
    NotAUrl(String),
    #[error("base_url must be an http:// or https:// URL with a host")]
    Scheme,
    #[error(
        "base_url must not contain a user name or password; the API key has a field of its own"
    )]
    UserInfo,
    #[error("base_url must not contain a query (the part from \"?\")")]
    Query,
    #[error("base_url must not contain a fragment (the part from \"#\")")]
    Fragment,
    #[error(transparent)]
    Refused(#[from] Refused),
}

/// An address the policy refuses, and the setting that would allow it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{subject} {verb} {reason}; an administrator can allow it with {ALLOW_SETTING}", verb = if *resolved { "resolves to" } else { "is" })]
pub struct Refused {
    /// `HOST:PORT` of an IP literal, or the name that resolved.
    subject: String,
    pub reason: Reason,
    /// Refused by the resolver, on what the name resolved to.
    resolved: bool,
}

/// Resolves names with the system's resolver and keeps what the policy allows.
struct Resolver {
    policy: Arc<EgressPolicy>,
    /// The resolver of allowed requests: an allowed name keeps its refused addresses.
    relaxed: bool,
}

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let name = name.as_str().to_owned();
        let allowed = self.relaxed && self.policy.allows_name(&name);
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((name.as_str(), 0)).await?;
            let kept = screen(&name, addrs, allowed)?;
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The one client of outbound requests, and the policy its requests are checked against.
#[derive(Clone)]
pub struct Outbound {
    /// For every URL but those to an allowed (host, port).
    public: reqwest::Client,
    allowed: reqwest::Client,
    policy: Arc<EgressPolicy>,
}

impl Outbound {
    /// [`EgressPolicy::check`] under this client's policy.
    pub fn check(&self, url: &str) -> Result<PublicUrl, UrlError> {
        self.policy.check(url)
    }

    /// [`EgressPolicy::check_with_query`] with no allowance at all: for addresses a model
    /// names (a page to read), which may only be public. (The request then goes through
    /// the client whose resolver keeps public addresses only.)
    pub fn check_public(&self, url: &str) -> Result<PublicUrl, UrlError> {
        EgressPolicy::default().check_with_query(url)
    }

    /// [`EgressPolicy::check_with_query`] under this client's policy.
    pub fn check_with_query(&self, url: &str) -> Result<PublicUrl, UrlError> {
        self.policy.check_with_query(url)
    }

    pub fn post(&self, url: &PublicUrl) -> reqwest::RequestBuilder {
        self.client_for(url).post(url.url.clone())
    }

    pub fn get(&self, url: &PublicUrl) -> reqwest::RequestBuilder {
        self.client_for(url).get(url.url.clone())
    }

    pub fn delete(&self, url: &PublicUrl) -> reqwest::RequestBuilder {
        self.client_for(url).delete(url.url.clone())
    }

    /// [`Outbound::check`], and for a name not allowed, what it resolves to now screened as
    /// the resolver will screen it at each connect: an address a user gives Hero to keep
    /// (an MCP server's) is refused when it is given, not only when it is first called. A
    /// name that does not resolve now passes (its calls will fail, saying why).
    pub async fn check_now(&self, url: &str) -> Result<PublicUrl, String> {
        let checked = self.check(url).map_err(|e| e.to_string())?;
        if checked.allowed {
            return Ok(checked);
        }
        if let (Some(name), Some(port)) =
            (checked.url.host_str(), checked.url.port_or_known_default())
            && !name.starts_with('[')
            && name.parse::<IpAddr>().is_err()
            && let Ok(addrs) = tokio::net::lookup_host((name, port)).await
        {
            screen(name, addrs, false).map_err(|e| e.to_string())?;
        }
        Ok(checked)
    }

    fn client_for(&self, url: &PublicUrl) -> &reqwest::Client {
        if url.allowed {
            &self.allowed
        } else {
            &self.public
        }
    }
}

/// The policy's refusal somewhere in an error's chain of causes (the resolver's, inside
/// reqwest's and hyper's errors).
pub fn refusal_in<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refused> {
    let mut cur = Some(e);
    while let Some(c) = cur {
        if let Some(r) = c.downcast_ref::<Refused>() {
            return Some(r);
        }
        cur = c.source();
    }
    None
}

#[cfg(test)]
mod tests;
