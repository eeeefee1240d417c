#include "engine/base/yaml_guard.hpp"

#include <yaml.h>

namespace plumb::yaml {

Status check(std::string_view text, const std::string& origin) {
  if (text.size() > kMaxBytes) {
    return fail(cni_code::kDecode, "cannot decode " + origin + ": larger than " + std::to_string(kMaxBytes) + " bytes");
  }
  yaml_parser_t parser;
  if (yaml_parser_initialize(&parser) == 0) return fail(cni_code::kInternal, "cannot initialise the YAML parser");
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  Status result;
  int depth = 0;
  size_t aliases = 0;
  for (bool done = false; !done;) {
    yaml_event_t event;
    if (yaml_parser_parse(&parser, &event) == 0) {
      std::string problem = parser.problem != nullptr ? parser.problem : "malformed YAML";
      result = fail(cni_code::kDecode, "cannot decode " + origin + ": " + problem + " at line " +
                                           std::to_string(parser.problem_mark.line + 1) + ", column " +
                                           std::to_string(parser.problem_mark.column + 1));
      break;
    }
    switch (event.type) {
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT:
        if (++depth > kMaxDepth) result = fail(cni_code::kDecode, "cannot decode " + origin + ": nested deeper than " + std::to_string(kMaxDepth));
        break;
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT:
        --depth;
        break;
      case YAML_ALIAS_EVENT:
        if (++aliases > kMaxAliases) result = fail(cni_code::kDecode, "cannot decode " + origin + ": more than " + std::to_string(kMaxAliases) + " aliases");
        break;
      case YAML_STREAM_END_EVENT:
        done = true;
        break;
      default:
        break;
    }
    yaml_event_delete(&event);
    if (!result) break;
  }
  yaml_parser_delete(&parser);
  return result;
}

}  // namespace plumb::yaml
