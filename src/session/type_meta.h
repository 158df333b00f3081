// Conversions between the IR's TypeInfo and the public ValueMeta, and feed checks.
#pragma once
#include "ir/graph.h"
#include "nxrt/session.h"

namespace nxrt::session {

ValueMeta to_value_meta(const std::string& name, const ir::TypeInfo& t);
ir::TypeInfo to_type_info(const ValueMeta& m);
// A fed value must match the declared kind, dtype, rank and fixed dims.
Status check_feed(const ValueMeta& meta, const Value& v);

}  // namespace nxrt::session
