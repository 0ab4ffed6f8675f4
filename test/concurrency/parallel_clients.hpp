// Runs N clients at once, each a std::thread with its own connection (its own backend), and
// releases them together so their calls really overlap on the server.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pg_connection.hpp"

namespace ratelimit_test {

// A single-use barrier (C++17 has no std::barrier): the last thread to arrive releases all.
class StartBarrier {
  public:
    explicit StartBarrier(int parties) : waiting_(parties) {}

    void arrive_and_wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        if (--waiting_ == 0) {
            released_ = true;
            released_cv_.notify_all();
            return;
        }
        released_cv_.wait(lock, [this] { return released_; });
    }

  private:
    std::mutex mutex_;
    std::condition_variable released_cv_;
    int waiting_;
    bool released_ = false;
};

// What a client does; `client` is its index in [0, clients).
using ClientStep = std::function<void(int client, PgConnection& conn)>;

// Each client connects and runs `prepare` (session settings; may be empty), then waits until
// every client is connected and prepared, then runs `body`. Returns one message per client that
// failed to connect or prepare, or whose step threw. Steps report failures by throwing, since
// an exception must not escape a std::thread; results go to storage the caller owns, read
// after the threads are joined.
inline std::vector<std::string> run_parallel_clients(int clients, const ClientStep& prepare,
                                                     const ClientStep& body) {
    StartBarrier barrier(clients);
    std::mutex failures_mutex;
    std::vector<std::string> failures;
    auto record = [&](int client, const std::string& what) {
        std::lock_guard<std::mutex> lock(failures_mutex);
        failures.push_back("client " + std::to_string(client) + ": " + what);
    };

    std::vector<std::thread> threads;
    threads.reserve(clients);
    for (int client = 0; client < clients; ++client) {
        threads.emplace_back([&, client] {
            PgConnection conn;
            bool ready = conn.connected();
            if (!ready) {
                record(client, "connection failed: " + conn.error_message());
            } else if (prepare) {
                try {
                    prepare(client, conn);
                } catch (const std::exception& e) {
                    ready = false;
                    record(client, std::string("prepare: ") + e.what());
                }
            }
            // Arrive even after a failure, or the other clients would wait forever.
            barrier.arrive_and_wait();
            if (!ready) {
                return;
            }
            try {
                body(client, conn);
            } catch (const std::exception& e) {
                record(client, e.what());
            }
        });
    }
    for (std::thread& thread : threads) {
        thread.join();
    }
    return failures;
}

inline std::string join_lines(const std::vector<std::string>& lines) {
    std::string text;
    for (const std::string& line : lines) {
        text += line + "\n";
    }
    return text;
}

}  // namespace ratelimit_test
