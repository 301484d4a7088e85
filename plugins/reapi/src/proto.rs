//! The protocol messages and gRPC clients sf speaks with a cluster: the Remote Execution API
//! v2, ByteStream, long-running Operations and google.rpc from bazel-remote-apis, and the
//! Remote Workers API v1test2 (which that crate lacks), generated from the descriptors the
//! buildgrid wheel ships (`plugins/reapi/proto/regenerate.sh`; checked in, so nothing is
//! generated at build time).

pub use bazel_remote_apis::build::bazel::remote::execution::v2 as execution;
pub use bazel_remote_apis::google::{bytestream, longrunning, protobuf, rpc};

/// The generated Remote Workers API, in the module tree its code refers to.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
mod generated {
    pub mod google {
        pub mod protobuf {
            include!("generated/google.protobuf.rs");
        }
        pub mod devtools {
            pub mod remoteworkers {
                pub mod v1test2 {
                    include!("generated/google.devtools.remoteworkers.v1test2.rs");
                }
            }
        }
    }
}

/// The Remote Workers API v1test2: bot sessions and leases.
pub use generated::google::devtools::remoteworkers::v1test2 as remoteworkers;
