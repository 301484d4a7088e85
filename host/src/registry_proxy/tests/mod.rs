//! The proxy served end to end over loopback sockets: registries are loopback servers the
//! tests start, reached through a resolver that notes every name it was asked, so that a test
//! sees whether the proxy resolved or connected at all. Nothing here reaches the internet.

mod descriptors;
mod lifecycle;
mod limits;
mod refusals;
mod support;
mod tunnels;
