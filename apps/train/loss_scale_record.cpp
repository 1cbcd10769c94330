#include "loss_scale_record.hpp"

namespace celer::train_app {

void loss_scale_record::note(const step_total& t, std::vector<trainer::scalar>& figures) {
  if (!on()) return;
  figures.push_back({"loss_scale", t.loss_scale});
  figures.push_back({"overflow", t.overflow ? 1.0 : 0.0});
  overflows_ += t.overflow ? 1 : 0;
  last_scale_ = t.loss_scale;
}

void loss_scale_record::summarise(nlohmann::ordered_json& summary) const {
  if (!on()) return;
  summary["loss_scale_overflows"] = overflows_;
  summary["final_loss_scale"] = last_scale_;
}

} // namespace celer::train_app
