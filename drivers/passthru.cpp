// Multus's "passthru" plugin (cmd/passthru-cni): the first plugin of the auxiliary CNI chain
// (plumb config auxiliaryCNIChainName), so that the chain's drop-in plugins run chained after
// something. ADD returns an empty result (no interface, no address) whatever it is given; DEL
// and CHECK have nothing to do. No keys of its own.
#include "drivers/registry.hpp"

namespace plumb::drivers {
namespace {

struct PassthruConfig : Config {};

Result<PassthruConfig> parse_config(const json::Value&, const ParseInput&) { return PassthruConfig{}; }

Result<cni::CniResult> passthru_add(Context&, const PassthruConfig&, const cni::CniResult*) { return cni::CniResult{}; }

Status passthru_check(Context&, const PassthruConfig&, const cni::CniResult&) { return {}; }

}  // namespace

const Driver kPassthru = make_driver<PassthruConfig, parse_config, passthru_add, passthru_check>("passthru");

}  // namespace plumb::drivers
