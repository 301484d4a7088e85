//! Every contract this host knows, registered once: the contracts the loader instantiates
//! ([`KNOWN_CONTRACTS`]) and the backend sections of `sf.toml` with their default tags, both
//! read from [`CONTRACTS`].

use super::config::Configured;
use super::contract::HostContract;
use super::evidence_store_protocol::EvidenceStoreContract;
use super::executor_protocol::ExecutorContract;
use super::fence_protocol::FenceContract;
use super::gate_protocol::GateContract;
use super::object_store_protocol::ObjectStoreContract;

/// Every contract this host knows, in the order messages list them. A new contract is one
/// line here.
pub const CONTRACTS: &[Registered] = &[
    Registered::configured::<ObjectStoreContract>(),
    Registered::configured::<ExecutorContract>(),
    Registered::configured::<EvidenceStoreContract>(),
    Registered::configured::<GateContract>(),
    Registered::companion::<FenceContract>(),
];

/// The contracts a plugin may provide that this sf instantiates, by their names on the wire.
pub const KNOWN_CONTRACTS: &[&str] = &names::<{ CONTRACTS.len() }>(CONTRACTS);

/// A contract as the host registers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registered {
    /// Its name in manifests and in `instantiate`.
    pub name: &'static str,
    /// The section of `sf.toml` that configures it, if it has one of its own.
    pub section: Option<BackendSection>,
}

/// A backend section of `sf.toml`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackendSection {
    /// The section's name (`gate` for `[gate]`).
    pub name: &'static str,
    /// The tag a configuration without the section takes.
    pub default_tag: &'static str,
}

impl Registered {
    /// A contract configured by a section of its own.
    pub const fn configured<C: Configured>() -> Self {
        Self {
            name: C::NAME,
            section: Some(BackendSection {
                name: C::SECTION,
                default_tag: C::DEFAULT_TAG,
            }),
        }
    }

    /// A contract without a section, served by the plugin of another's (the fence, by the
    /// evidence store's).
    pub const fn companion<C: HostContract>() -> Self {
        Self {
            name: C::NAME,
            section: None,
        }
    }
}

/// The backend sections, in the order of [`CONTRACTS`].
pub fn backend_sections() -> impl Iterator<Item = BackendSection> {
    CONTRACTS.iter().filter_map(|contract| contract.section)
}

const fn names<const N: usize>(contracts: &[Registered]) -> [&'static str; N] {
    let mut names = [""; N];
    let mut at = 0;
    while at < N {
        names[at] = contracts[at].name;
        at += 1;
    }
    names
}
