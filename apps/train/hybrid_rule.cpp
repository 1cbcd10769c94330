// mode: hybrid's switching rule (hybrid_rule.hpp).
#include "hybrid_rule.hpp"

#include "text.hpp"

namespace celer::train_app {

std::optional<std::string> hybrid_switch_reason(const train_config& cfg, std::int64_t step, const std::vector<double>& losses) {
  if (cfg.hybrid_sync_steps > 0 && step >= cfg.hybrid_sync_steps)
    return "hybrid_sync_steps " + std::to_string(cfg.hybrid_sync_steps);
  const auto w = static_cast<std::size_t>(cfg.hybrid_plateau_window);
  if (w == 0 || losses.size() < 2 * w) return std::nullopt;
  double recent = 0, before = 0;
  for (std::size_t i = 0; i < w; ++i) {
    recent += losses[losses.size() - 1 - i];
    before += losses[losses.size() - 1 - w - i];
  }
  recent /= static_cast<double>(w);
  before /= static_cast<double>(w);
  if (before - recent >= cfg.hybrid_plateau_tolerance * before) return std::nullopt;
  return "the loss plateaued: mean " + fixed(recent, 4) + " over the last " + std::to_string(w) + " steps against " +
         fixed(before, 4) + " over the " + std::to_string(w) + " before, less than " +
         fixed(100 * cfg.hybrid_plateau_tolerance, 1) + "% lower";
}

std::string hybrid_rule(const train_config& cfg) {
  std::string rule;
  if (cfg.hybrid_sync_steps > 0) rule = "for " + std::to_string(cfg.hybrid_sync_steps) + " steps";
  if (cfg.hybrid_plateau_window > 0) {
    rule += (rule.empty() ? "" : " or ") + std::string("until the loss plateaus (window ") +
            std::to_string(cfg.hybrid_plateau_window) + ", tolerance " + fixed(cfg.hybrid_plateau_tolerance, 3) + ")";
  }
  return rule;
}

} // namespace celer::train_app
