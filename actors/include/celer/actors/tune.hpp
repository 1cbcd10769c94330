#pragma once
/// The policy core of `celer-tune`: search spaces and params (tune/space.hpp), searchers that
/// choose each trial's hyperparameters (tune/search.hpp: random, grid, TPE) and schedulers that
/// decide whether a running trial goes on (tune/schedule.hpp: FIFO, ASHA, median stopping,
/// PBT). Pure logic: no runtime calls, no LibTorch; the app runs the trials as actors.
///
///   namespace tune = celer::tune;
///   auto space = tune::search_space{}.log_uniform("lr", 1e-4, 1e-1).integer("layers", 1, 4);
///   auto search = tune::make_tpe_search(space, {.mode = tune::direction::maximize, .seed = 1});
///   auto asha = tune::make_asha({.mode = tune::direction::maximize, .max_t = 27,
///                                .reduction_factor = 3});
///   if (!search || !asha) return 1;
///   for (tune::trial_id id = 0; auto p = (*search)->suggest(); ++id) {
///     double accuracy = 0;
///     for (std::int64_t epoch = 1;; ++epoch) {
///       accuracy = train_one_epoch(*p);
///       if ((*asha)->on_result(id, epoch, accuracy).what != tune::decision::action::continue_)
///         break;
///     }
///     (*asha)->on_complete(id);
///     (void)(*search)->observe(*p, accuracy);
///   }
///
/// Every random choice comes from a seed the caller gives, so an experiment replays.

#include <celer/actors/tune/schedule.hpp>
#include <celer/actors/tune/search.hpp>
#include <celer/actors/tune/space.hpp>
