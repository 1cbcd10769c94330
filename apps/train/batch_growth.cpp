#include "batch_growth.hpp"

#include "text.hpp"

namespace celer::train_app {

void batch_growth::note(const step_total& t, std::vector<trainer::scalar>& figures, std::ostream& out) {
  if (!on()) return;
  figures.push_back({"batch_size", static_cast<double>(t.batch_size)});
  if (t.noise_scale >= 0) figures.push_back({"noise_scale", t.noise_scale});
  figures.push_back({"lr", t.lr});
  if (last_batch_ > 0 && t.batch_size != last_batch_) {
    out << "celer-train: step " << t.step << ": the batch grows from " << last_batch_ << " to " << t.batch_size
        << " samples a step (noise scale " << fixed(last_noise_scale_, 0) << " > " << last_batch_ << ")"
        << (cfg_.batch_size_lr_scaling != "none" ? ", lr " + fixed(t.lr, 5) : std::string()) << "\n";
  }
  last_batch_ = t.batch_size;
  last_noise_scale_ = t.noise_scale;
}

void batch_growth::summarise(nlohmann::ordered_json& summary) const {
  if (!on()) return;
  summary["final_batch_size"] = last_batch_;
  summary["final_noise_scale"] = last_noise_scale_ >= 0 ? nlohmann::json(last_noise_scale_) : nullptr;
}

} // namespace celer::train_app
