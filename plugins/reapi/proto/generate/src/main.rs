//! Writes the prost messages and the tonic client of the Remote Workers API v1test2 from a
//! FileDescriptorSet (no protoc): `generate FDS OUT_DIR`. The well-known types and
//! google.rpc.Status come from bazel-remote-apis, so that one `Any` type serves both APIs;
//! `FieldMask` (which that crate lacks) is generated.

use prost::Message as _;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(set), Some(out)) = (args.next(), args.next()) else {
        panic!("usage: generate FILE_DESCRIPTOR_SET OUT_DIR");
    };
    let bytes = std::fs::read(&set).expect("reading the descriptor set");
    let files = prost_types::FileDescriptorSet::decode(bytes.as_slice()).expect("a descriptor set");
    tonic_prost_build::configure()
        .build_server(false)
        .build_transport(false)
        .compile_well_known_types(true)
        .out_dir(&out)
        .extern_path(".google.protobuf.Any", "::bazel_remote_apis::google::protobuf::Any")
        .extern_path(".google.protobuf.Empty", "::bazel_remote_apis::google::protobuf::Empty")
        .extern_path(
            ".google.protobuf.Timestamp",
            "::bazel_remote_apis::google::protobuf::Timestamp",
        )
        .extern_path(".google.rpc", "::bazel_remote_apis::google::rpc")
        .compile_fds(files)
        .expect("generating the Remote Workers API");
}
