#!/usr/bin/env bash
# Generates the Python messages (_pb2.py) and gRPC stubs (_pb2_grpc.py) for
# proto/agentbus/v1 into an output directory (default: clients/python/agentbus_pb,
# git-ignored; generated code is committed only under gen/).
#
# Uses Debian's tooling: protoc from `protobuf-compiler` (3.21) and the gRPC
# plugin from `protobuf-compiler-grpc`. Not `python3 -m grpc_tools.protoc`:
# bookworm's python3-grpc-tools (1.14) bundles protoc 3.5, which rejects the
# proto3 `optional` fields the API uses.
#
# The google/api and google/rpc imports come from the google-proto-files npm
# package (run `npm install` first); google/protobuf is in python3-protobuf.
#
# Usage: clients/python/generate.sh [OUT_DIR]
# Overrides: PROTOC, GRPC_PYTHON_PLUGIN, GOOGLE_PROTOS_DIR.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$here/agentbus_pb}
protoc=${PROTOC:-protoc}
plugin=${GRPC_PYTHON_PLUGIN:-$(command -v grpc_python_plugin || true)}
google=${GOOGLE_PROTOS_DIR:-$root/node_modules/google-proto-files}

command -v "$protoc" >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler" >&2; exit 1; }
[ -n "$plugin" ] && [ -x "$plugin" ] || { echo "grpc_python_plugin not found: apt-get install protobuf-compiler-grpc" >&2; exit 1; }
[ -f "$google/google/api/annotations.proto" ] || { echo "google/api protos not found in $google: run npm install" >&2; exit 1; }

mkdir -p "$out"
# Only what this script writes, so a mistaken OUT_DIR loses nothing else.
rm -rf "$out/agentbus" "$out/google"

# google/protobuf is not generated: the python3-protobuf runtime has it.
"$protoc" \
  -I "$root/proto" -I "$google" \
  --plugin=protoc-gen-grpc_python="$plugin" \
  --python_out="$out" --grpc_python_out="$out" \
  "$root"/proto/agentbus/v1/*.proto \
  "$google/google/api/annotations.proto" "$google/google/api/http.proto" "$google/google/api/httpbody.proto" \
  "$google/google/rpc/status.proto"

echo "generated $(find "$out/agentbus" "$out/google" -name '*.py' | wc -l) files into $out"
