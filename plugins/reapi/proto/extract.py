"""Writes remoteworkers.fds: the descriptors of the Remote Workers API v1test2 (bots.proto,
worker.proto) and the well-known files they import, as the buildgrid wheel on PyPI compiled
them (its _pb2 modules hold each file's FileDescriptorProto). The google/api HTTP annotations
and descriptor.proto are left out, and the options that name them cleared: they only
annotate REST mappings, which a gRPC client never reads.

Run with the Python of a venv where `pip install buildgrid==0.4.4` was done:
    python extract.py remoteworkers.fds
"""
import sys

from google.protobuf import descriptor_pb2
from buildgrid._protos.google.devtools.remoteworkers.v1test2 import bots_pb2

SKIP = ("google/api/", "google/protobuf/descriptor.proto")

files = descriptor_pb2.FileDescriptorSet()
seen = set()


def add(descriptor):
    if descriptor.name in seen or descriptor.name.startswith(SKIP):
        return
    seen.add(descriptor.name)
    for dependency in descriptor.dependencies:
        add(dependency)
    proto = files.file.add()
    descriptor.CopyToProto(proto)
    kept = [name for name in proto.dependency if not name.startswith(SKIP)]
    del proto.dependency[:]
    proto.dependency.extend(kept)
    for service in proto.service:
        for method in service.method:
            method.ClearField("options")
    for message in proto.message_type:
        for field in message.field:
            field.ClearField("options")


add(bots_pb2.DESCRIPTOR)
with open(sys.argv[1], "wb") as out:
    out.write(files.SerializeToString())
