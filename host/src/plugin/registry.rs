//! Every contract this host knows, registered once: the contracts the loader instantiates
//! ([`KNOWN_CONTRACTS`]) and the backend sections of `sf.toml` with their default tags, both
//! read from [`CONTRACTS`].

use super::config::Configured;
use super::contract::{self, HostContract};
use super::error::PluginError;

/// Every contract this host knows, in the order messages list them. A new contract is one
/// line here.
pub const CONTRACTS: &[Registered] = &[
    Registered::configured::<super::object_store_protocol::ObjectStoreContract>(),
    Registered::configured::<super::executor_protocol::ExecutorContract>(),
    Registered::configured::<super::evidence_store_protocol::EvidenceStoreContract>(),
    Registered::configured::<super::gate_protocol::GateContract>(),
    Registered::companion::<super::fence_protocol::FenceContract>(),
];

/// The contracts a plugin may provide that this sf instantiates, by their names on the wire.
pub const KNOWN_CONTRACTS: &[&str] = &names::<{ CONTRACTS.len() }>(CONTRACTS);

/// A contract as the host registers it.
#[derive(Clone, Copy, Debug)]
pub struct Registered {
    /// Its name in manifests and in `instantiate`.
    pub name: &'static str,
    /// The section of `sf.toml` that configures it, if it has one of its own.
    pub section: Option<BackendSection>,
    /// How a contract error answered by `instantiate` reads ([`contract::instantiate_error`]).
    pub instantiate_error: fn(&str, &str, &[u8]) -> PluginError,
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
            instantiate_error: contract::instantiate_error::<C>,
        }
    }

    /// A contract without a section, served by the plugin of another's (the fence, by the
    /// evidence store's).
    pub const fn companion<C: HostContract>() -> Self {
        Self {
            name: C::NAME,
            section: None,
            instantiate_error: contract::instantiate_error::<C>,
        }
    }
}

/// The contract error `plugin` answered to `during`, an `instantiate` of `contract`, as the
/// host reports it ([`contract::instantiate_error`] of that contract).
pub fn instantiate_error(contract: &str, plugin: &str, during: &str, bytes: &[u8]) -> PluginError {
    match CONTRACTS
        .iter()
        .find(|registered| registered.name == contract)
    {
        Some(registered) => (registered.instantiate_error)(plugin, during, bytes),
        None => contract::malformed_message(
            plugin,
            during,
            "a contract error of a contract this sf does not know",
        ),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_known_contracts_are_the_registered_ones_in_order() {
        assert_eq!(
            KNOWN_CONTRACTS,
            [
                "object-store",
                "executor",
                "evidence-store",
                "gate",
                "fence"
            ]
        );
        let sections: Vec<_> = backend_sections().map(|section| section.name).collect();
        assert_eq!(
            sections,
            ["object_store", "executor", "evidence_store", "gate"]
        );
    }
}
