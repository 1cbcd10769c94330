// What goes wrong, and what celer tells you: every error is typed and the runtime keeps
// working after each.
#include "report_errors.hpp"

#include <celer/celer.hpp>

#include <chrono>
#include <iostream>
#include <stdexcept>
#include <thread>

int divide(int a, int b) {
  if (b == 0) throw std::invalid_argument("division by zero");
  return a / b;
}
int slow(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return ms;
}
int not_registered(int x) { return x; }

struct account {
  int deposit(int n) { return balance += n; }
  int balance = 0;
};
account* open_account() { return new account(); }

CELER_REMOTE(divide, slow, open_account, &account::deposit);

template <class F>
void show(const char* what, F&& f) {
  try {
    f();
    std::cout << what << ": no error\n";
  } catch (const celer::task_error& e) {
    std::cout << what << ": task_error in " << e.function() << ": " << e.remote_message() << "\n";
  } catch (const celer::get_timeout_error& e) {
    std::cout << what << ": get_timeout_error: " << e.what() << "\n";
  } catch (const celer::actor_died_error& e) {
    std::cout << what << ": actor_died_error: " << e.what() << "\n";
  } catch (const celer::infeasible_error& e) {
    std::cout << what << ": infeasible_error: " << e.what() << "\n";
  } catch (const celer::exception& e) {
    std::cout << what << ": " << celer::to_string(e.code()) << ": " << e.what() << "\n";
  }
}

int main(int argc, char** argv) {
  // Errors this program does not expect (no cluster at the address given, say) end it with
  // a message and a hint (report_errors.hpp).
  return report_errors([&] {
    celer::init(argc, argv);
    show("remote exception", [] { celer::get(celer::task(divide).remote(1, 0)); });
    show("unregistered function", [] { celer::task(not_registered).remote(1); });
    show("get timeout", [] { celer::get(celer::task(slow).remote(500), std::chrono::milliseconds(50)); });
    show("infeasible request", [] {
      celer::get(celer::task(slow).options({.num_cpus = 10000}).remote(1));
    });
    auto acct = celer::actor(open_account).remote();
    celer::get(acct.task(&account::deposit).remote(5));
    celer::kill(acct);
    show("call to a killed actor", [&] { celer::get(acct.task(&account::deposit).remote(5)); });
    // Still working after all of that:
    std::cout << "10 / 2 = " << celer::get(celer::task(divide).remote(10, 2)) << "\n";
    celer::shutdown();
    return 0;
  });
}
