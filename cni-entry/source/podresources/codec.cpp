// plumb-podresources.so: kubelet's pod-resources messages through the protobuf-lite code protoc
// generates from api.proto, behind the C table of codec_abi.h. Built as its own shared object and
// carried inside the plumb binary (see codec_abi.h): this file is not part of plumb_front.
#include <string_view>

#include "api.pb.h"
#include "codec_abi.h"

namespace {

template <class Message>
size_t serialize(const Message& m, char* out, size_t cap) {
  const size_t size = m.ByteSizeLong();
  if (size <= cap && out != nullptr) m.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out));
  return size;
}

size_t encode_get(const char* ns, size_t ns_len, const char* name, size_t name_len, char* out, size_t cap) {
  v1::GetPodResourcesRequest req;
  req.set_pod_namespace(std::string(ns, ns_len));
  req.set_pod_name(std::string(name, name_len));
  return serialize(req, out, cap);
}

size_t encode_list(char* out, size_t cap) { return serialize(v1::ListPodResourcesRequest{}, out, cap); }

bool is_pod(const v1::PodResources& pod, std::string_view ns, std::string_view name) {
  return pod.namespace_() == ns && pod.name() == name;
}

void emit(const v1::PodResources& pod, plumb_pr_device_sink sink, void* user) {
  for (const auto& container : pod.containers()) {
    for (const auto& devices : container.devices()) {
      for (const auto& id : devices.device_ids()) {
        sink(user, devices.resource_name().data(), devices.resource_name().size(), id.data(), id.size());
      }
    }
  }
}

int decode_get(const char* data, size_t len, const char* ns, size_t ns_len, const char* name, size_t name_len,
               plumb_pr_device_sink sink, void* user) {
  v1::GetPodResourcesResponse resp;
  if (!resp.ParseFromArray(data, static_cast<int>(len))) return PLUMB_PR_MALFORMED;
  if (!resp.has_pod_resources() || !is_pod(resp.pod_resources(), {ns, ns_len}, {name, name_len})) {
    return PLUMB_PR_POD_ABSENT;
  }
  emit(resp.pod_resources(), sink, user);
  return PLUMB_PR_OK;
}

int decode_list(const char* data, size_t len, const char* ns, size_t ns_len, const char* name, size_t name_len,
                plumb_pr_device_sink sink, void* user) {
  v1::ListPodResourcesResponse resp;
  if (!resp.ParseFromArray(data, static_cast<int>(len))) return PLUMB_PR_MALFORMED;
  bool found = false;
  for (const auto& pod : resp.pod_resources()) {
    if (!is_pod(pod, {ns, ns_len}, {name, name_len})) continue;
    found = true;
    emit(pod, sink, user);
  }
  return found ? PLUMB_PR_OK : PLUMB_PR_POD_ABSENT;
}

constexpr plumb_podresources_codec kCodec = {PLUMB_PODRESOURCES_ABI, encode_get, encode_list, decode_get, decode_list};

}  // namespace

extern "C" __attribute__((visibility("default"))) const plumb_podresources_codec* plumb_podresources_entry() {
  return &kCodec;
}
