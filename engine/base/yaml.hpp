// YAML as Kubernetes reads it: libyaml's event parser (the reference C parser) turned into RapidJSON
// documents, typed the way sigs.k8s.io/yaml (go-yaml v2) converts YAML to JSON; and the reverse,
// JSON values written as block YAML with libyaml's emitter. Every YAML text plumb reads
// (NetworkAttachmentDefinitions, pod and IPAMClaim manifests, kubeconfigs) goes through load_all or
// load, once, bounded in size, depth and alias expansion.
//
// Scalars (the resolution of go-yaml v2, which sigs.k8s.io/yaml uses):
//   - quoted (single, double), literal (|) and folded (>) scalars are strings;
//   - plain scalars: "", ~, null, Null, NULL are null; y Y yes Yes YES on On ON true True TRUE are
//     true and n N no No NO off Off OFF false False FALSE false (YAML 1.1's booleans, as go-yaml v2);
//     [-+]?[0-9]+, 0x.., 0o.., 0b.. integers (int64, else uint64, else a float); decimal floats
//     ([-+]?(.5|1|1.|1.5)(e[-+]?N)?); .inf/.nan (every spelling) are an error naming the key, JSON
//     has no such numbers (Kubernetes fails the same way, in json.Marshal); anything else a string;
//   - tags: !!str makes a string (!!binary too: its base64 text), !!int !!float !!bool !!null
//     require the text to resolve to that type (an error naming it otherwise), other tags are ignored.
// README.md ("How YAML is read") lists where this differs from Kubernetes.
// Mapping keys are the key scalar's text as written (a non-scalar key is an error naming its
// position); of duplicate keys the last is kept, as json::parse does (and go-yaml v2 non-strict).
// Anchors are document-scoped; an alias is a copy of the anchored value.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/base/json.hpp"
#include "engine/base/result.hpp"

namespace plumb::yaml {

/// Limits for untrusted YAML (NADs, pod manifests, kubeconfigs are all small).
inline constexpr size_t kMaxBytes = 4u << 20;           // 4 MiB of text
inline constexpr unsigned kMaxDepth = json::kMaxDepth;  // nesting of collections (64)
inline constexpr size_t kMaxAliases = 1000;             // alias events per stream
/// What aliases may add in all ("billion laughs"): each alias costs the size of the value it
/// copies (one per node plus its string bytes), summed over the stream.
inline constexpr size_t kMaxAliasExpansion = kMaxBytes;

/// Parses every document of `text` (an empty stream gives none; `---` alone gives a null
/// document). JSON is YAML: a JSON text gives its value. Errors: kDecode "cannot decode <origin>:
/// <problem> at line L, column C" for malformed YAML (libyaml's problem and position), a
/// non-scalar mapping key, an unknown alias, .inf/.nan, a tagged scalar of the wrong type, or a
/// limit above exceeded.
[[nodiscard]] Result<std::vector<json::Document>> load_all(std::string_view text, const std::string& origin);

/// The first document of `text` (a null document when there is none); what follows it is not
/// read, as go-yaml's Unmarshal and sigs.k8s.io/yaml do. Errors: load_all's, for that document.
[[nodiscard]] Result<json::Document> load(std::string_view text, const std::string& origin);

/// Writes `v` as one block-style YAML document with libyaml's emitter, object members in their
/// order; a string is quoted whenever its plain form would not read back as that string (e.g.
/// "true", "1", ""). Errors: kInternal when libyaml refuses a value (a string that is not UTF-8).
[[nodiscard]] Result<std::string> dump(const json::Value& v);

}  // namespace plumb::yaml
