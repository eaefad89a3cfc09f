#pragma once
// Plans as JSON ("refit-plan" version 1), so one process can plan and others simulate or run it.
#include <iosfwd>
#include <string>
#include <string_view>

#include "refit/core/error.h"
#include "refit/planner/plan.h"

namespace refit {

void write_plan_json(const Plan& plan, std::ostream& out);
// Errors name the JSON path of the offending field, e.g. transfers[3].segments[0].extent.
[[nodiscard]] Result<Plan> parse_plan_json(std::string_view text);
[[nodiscard]] Result<Plan> load_plan_file(const std::string& path);

}  // namespace refit
