#pragma once
/// The policy core of `celer-tune`: search spaces and params (tune/space.hpp) and searchers
/// that choose each trial's hyperparameters (tune/search.hpp: random, grid, TPE). Pure logic:
/// no runtime calls, no LibTorch; the app runs the trials as actors.
///
///   namespace tune = celer::tune;
///   auto space = tune::search_space{}.log_uniform("lr", 1e-4, 1e-1).integer("layers", 1, 4);
///   auto search = tune::make_tpe_search(space, {.mode = tune::direction::maximize, .seed = 1});
///   if (!search) return 1;
///   while (auto p = (*search)->suggest()) {
///     double accuracy = train(*p);
///     (void)(*search)->observe(*p, accuracy);
///   }
///
/// Every random choice comes from a seed the caller gives, so an experiment replays.

#include <celer/actors/tune/search.hpp>
#include <celer/actors/tune/space.hpp>
