// liblattice from C++ through <lattice/lattice.hpp>: handles that free
// themselves, exceptions for failures, spans for buffers. run_consumers.py
// builds it against an installed copy with `pkg-config --cflags --libs
// lattice` (as C++11 and as C++20, where lattice::span is std::span) and with
// CMake's lattice::lattice; tests/consumer/meson.build builds it in the tree.
// Trains a tiny model and prints the loss, checks the views, trains on with
// a data object and a trainer, sets a schedule's rewind_data and attaches an
// in-process collective to a trainer, then provokes errors (trainer, model,
// data create, check()) and checks their statuses and messages.
#include <lattice/lattice.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#ifdef LATTICE_HPP_STD_SPAN
static_assert(std::is_same<lattice::span<const float>, std::span<const float> >::value,
              "C++20: lattice::span is std::span");
#endif
static_assert(!std::is_copy_constructible<lattice::model>::value, "handles are not copyable");
static_assert(std::is_nothrow_move_constructible<lattice::model>::value &&
                  std::is_nothrow_move_assignable<lattice::trainer>::value,
              "handles move");

namespace {

int failures = 0;

void expect(bool ok, const char *what)
{
    if (!ok) {
        std::fprintf(stderr, "FAIL: %s\n", what);
        failures++;
    }
}

// make() must throw lattice::error with status and a message holding needle
// (the library's reason, not a stale one nor a bare status string).
template <class F> void expect_throws(F make, lattice_status status, const char *needle, const char *what)
{
    try {
        make();
        std::fprintf(stderr, "FAIL: %s: did not throw\n", what);
        failures++;
    } catch (const lattice::error &e) {
        std::printf("caught (%s): %s\n", what, e.what());
        if (e.status() != status || e.errmsg().find(needle) == std::string::npos) {
            std::fprintf(stderr, "FAIL: %s: status %d, message '%s' (wanted %d, '%s')\n", what,
                         static_cast<int>(e.status()), e.errmsg().c_str(), static_cast<int>(status),
                         needle);
            failures++;
        }
    }
}

// An in-process collective of one rank (or one that claims more): it sums
// nothing, counts the calls that reach it, and fails every slot on demand.
struct fake_world {
    int ranks;
    int calls;
    bool down;
};

fake_world &world_of(void *user) { return *static_cast<fake_world *>(user); }
int fake_slot(void *user)
{
    fake_world &w = world_of(user);
    w.calls++;
    return w.down ? 5 : 0;
}
int fake_rank(void *) { return 0; }
int fake_n_ranks(void *user) { return world_of(user).ranks; }
int fake_sum_floats(void *user, float *, std::size_t) { return fake_slot(user); }
int fake_sum_doubles(void *user, double *, std::size_t) { return fake_slot(user); }
int fake_sum_int64(void *user, int64_t *, std::size_t) { return fake_slot(user); }
int fake_barrier(void *user) { return fake_slot(user); }
int fake_broadcast(void *user, void *, std::size_t, int) { return fake_slot(user); }
const char *fake_errmsg(void *) { return "the fake link is down"; }

lattice_trainer_collective fake_ops()
{
    lattice_trainer_collective ops = lattice_trainer_collective();
    ops.size = sizeof(ops);
    ops.rank = fake_rank;
    ops.n_ranks = fake_n_ranks;
    ops.sum_floats = fake_sum_floats;
    ops.sum_doubles = fake_sum_doubles;
    ops.sum_int64 = fake_sum_int64;
    ops.barrier = fake_barrier;
    ops.broadcast = fake_broadcast;
    ops.errmsg = fake_errmsg;
    return ops;
}

// rewind_data of phase index, as the C API reports it.
int rewind_of(const lattice::schedule &s, int index)
{
    lattice_schedule_phase ph;
    lattice_schedule_phase_init(&ph);
    lattice::check(lattice_schedule_get_phase(s.get(), index, &ph));
    return ph.rewind_data;
}

} // namespace

int main()
{
    try {
        const std::string text = "lattices in C++, handles that free themselves";
        const std::vector<int32_t> ids(text.begin(), text.end());
        const int seq = static_cast<int>(ids.size()) - 1;
        const lattice::span<const int32_t> all(ids);

        lattice::backend backend = lattice::backend::create();
        lattice_model_params mp;
        lattice_model_params_init(&mp);
        mp.d_model = 64;
        mp.n_layers = mp.n_active_layers = 2;
        mp.n_heads = mp.n_kv_heads = 4;
        mp.head_dim = 16;
        mp.d_ff = 128;
        mp.max_batch = 1;
        mp.max_seq = seq;
        // the norm is copied into the model: a temporary is fine
        lattice::model model =
            lattice::model::create(mp, lattice::norm::create(LATTICE_NORM_PLACEMENT_PRE), backend);

        lattice_optim_params op;
        lattice_optim_params_init(&op);
        op.lr = 3e-3f;
        op.warmup_steps = 0;
        op.total_steps = 20;
        lattice::optim optim = lattice::optim::create(model, op);

        for (int step = 0; step < 20; step++) {
            model.forward(all.subspan(0, static_cast<std::size_t>(seq)), 1, seq);
            float loss = model.cross_entropy(all.subspan(1, static_cast<std::size_t>(seq)));
            model.backward();
            optim.step();
            if (step % 5 == 0 || step == 19)
                std::printf("step %2d loss %.4f\n", step, loss);
        }

        // Views: as long as the last forward's batch * seq * vocab (or d_model).
        lattice::span<const float> logits = model.logits();
        expect(logits.size() == static_cast<std::size_t>(seq) * 257, "logits() covers [1, seq, vocab]");
        bool finite = true;
        for (float x : logits)
            finite = finite && std::isfinite(x);
        expect(finite, "logits are finite");
        expect(model.hidden(0).size() == static_cast<std::size_t>(seq) * 64,
               "hidden(0) covers [1, seq, d_model]");
        lattice::tensor emb = model.tensor_at(0);
        expect(emb.data().size() == emb.size() && emb.size() > 0, "tensor data view");

        // Past the capacity (since 1.1): while only its layers run, the grown model
        // gives this one's logits.
        {
            lattice::model big = model.grown(4);
            expect(big.params().n_layers == 4 && big.active_layers() == 2,
                   "grown(4) holds 4 layers, 2 of them active");
            model.forward(all.subspan(0, static_cast<std::size_t>(seq)), 1, seq);
            big.forward(all.subspan(0, static_cast<std::size_t>(seq)), 1, seq);
            expect(big.logits().size() == model.logits().size() &&
                       std::memcmp(big.logits().data(), model.logits().data(),
                                   sizeof(float) * model.logits().size()) == 0,
                   "a grown model's logits are its source's");
        }

        // Handles move; the moved-from one is empty.
        lattice::optim moved = std::move(optim);
        expect(static_cast<bool>(moved) && !optim, "a moved handle owns, its source is empty");

        // The same model through a data object, a schedule and a trainer.
        lattice_data_params dp;
        lattice_data_params_init(&dp); // byte text: vocab 257, as the model's default
        dp.batch_size = 1;
        dp.seq_len = seq;
        lattice::data corpus = lattice::data::from_memory(all, dp);
        lattice::batch first = corpus.next();
        expect(first.rows == 1 && first.tokens.size() == static_cast<std::size_t>(first.seq) &&
                   first.mask.size() == first.tokens.size() && first.n_tokens == seq,
               "a batch's views cover [rows, seq]");
        lattice::schedule sched = lattice::schedule::preset(LATTICE_SCHEDULE_PRESET_JOINT, 1, 2, 3);
        lattice::trainer trainer =
            lattice::trainer::create(model, nullptr, nullptr, corpus, moved, sched);
        for (int step = 0; step < 3; step++) {
            lattice_trainer_metrics m = trainer.step();
            expect(m.step == step + 1 && std::isfinite(m.loss), "trainer steps");
        }
        expect(sched.finished(), "the schedule ran out");
        try {
            trainer.step();
            expect(false, "a step after the schedule throws");
        } catch (const lattice::error &e) {
            std::printf("caught: %s\n", e.what());
            expect(e.status() == LATTICE_ERR_STATE && e.errmsg().find("finished") != std::string::npos,
                   "the trainer's errmsg travels");
        }

        // Replaying the shard: rewind_data on every phase after the first, and off again.
        {
            lattice::schedule grow = lattice::schedule::preset(LATTICE_SCHEDULE_PRESET_GROW, 2, 1, 2);
            expect(rewind_of(grow, 1) == 0, "no preset rewinds the data");
            grow.set_rewind_data(true);
            expect(rewind_of(grow, 0) == 0 && rewind_of(grow, 1) == 1,
                   "set_rewind_data(true) sets it on the phases after the first");
            grow.set_rewind_data(false);
            expect(rewind_of(grow, 1) == 0, "set_rewind_data(false) clears it");
            lattice::schedule none;
            expect_throws([&] { none.set_rewind_data(true); }, LATTICE_ERR_INVALID_ARGUMENT,
                          "schedule is NULL", "schedule::set_rewind_data on an empty handle");
        }

        // A collective attached from C++: a trainer over 2 (pretended) ranks
        // sums through it, its failures come back as lattice::error, and
        // detaching stops the sums. (With 1 rank a trainer calls no slot.)
        {
            lattice_model_params mp2 = mp;
            mp2.max_batch = 2;
            lattice::model m2 =
                lattice::model::create(mp2, lattice::norm::create(LATTICE_NORM_PLACEMENT_PRE), backend);
            lattice::optim o2 = lattice::optim::create(m2, op);
            lattice_data_params dp2 = dp;
            dp2.batch_size = 2; // the global batch: 1 row per rank
            lattice::data shard = lattice::data::from_memory(all, dp2);
            lattice::schedule s = lattice::schedule::preset(LATTICE_SCHEDULE_PRESET_JOINT, 1, 2, 4);
            lattice::trainer t = lattice::trainer::create(m2, nullptr, nullptr, shard, o2, s);
            fake_world w = {2, 0, false};
            const lattice_trainer_collective ops = fake_ops();
            t.set_collective(ops, &w);
            w.calls = 0;
            lattice_trainer_metrics m = t.step();
            expect(w.calls > 0 && std::isfinite(m.loss), "a step sums through the collective");
            w.down = true;
            expect_throws([&] { t.step(); }, LATTICE_ERR_BACKEND, "the fake link is down",
                          "a step whose collective fails");
            w.down = false;
            t.detach_collective();
            const int calls = w.calls;
            m = t.step();
            expect(w.calls == calls && std::isfinite(m.loss), "detached, a step sums nothing");
            lattice_trainer_collective partial = fake_ops();
            partial.barrier = nullptr;
            expect_throws([&] { t.set_collective(partial, &w); }, LATTICE_ERR_INVALID_ARGUMENT,
                          "ops->barrier is NULL", "trainer::set_collective without a barrier");
            fake_world four = {4, 0, false}; // 2 rows cannot be split over 4 ranks
            expect_throws([&] { t.set_collective(ops, &four); }, LATTICE_ERR_INVALID_CONFIG,
                          "does not divide by 4 ranks", "trainer::set_collective over 4 ranks");
            lattice::trainer empty;
            expect_throws([&] { empty.detach_collective(); }, LATTICE_ERR_INVALID_ARGUMENT,
                          "trainer is NULL", "trainer::detach_collective on an empty handle");
        }

        // Reading the gradient buffer is no loss; taking it to write is one.
        model.forward(all.subspan(0, static_cast<std::size_t>(seq)), 1, seq);
        const lattice::model &reader = model;
        expect(reader.dlogits_const().size() == static_cast<std::size_t>(seq) * 257u,
               "dlogits_const() covers the forward");
        expect_throws([&] { model.backward(); }, LATTICE_ERR_STATE, "no loss since the last forward",
                      "backward after reading dlogits_const() alone");
        model.cross_entropy(all.subspan(1, static_cast<std::size_t>(seq)));
        expect(reader.dlogits_const().data() == model.dlogits().data(),
               "dlogits_const() and dlogits() are one buffer");
        model.backward();

        // Inference and evaluation without a trainer.
        model.forward(all.subspan(0, static_cast<std::size_t>(seq)), 1, seq);
        const float train_ce = model.cross_entropy(all.subspan(1, static_cast<std::size_t>(seq)));
        model.forward_inference(all.subspan(0, static_cast<std::size_t>(seq)), 1, seq);
        int64_t counted = 0;
        const double infer_ce = model.cross_entropy_value(
            all.subspan(1, static_cast<std::size_t>(seq)), lattice::span<const uint8_t>(), &counted);
        expect(counted == seq && std::fabs(infer_ce - train_ce) < 1e-4 * (1.0 + train_ce),
               "forward_inference + loss match forward + cross_entropy");
        try {
            model.backward();
            expect(false, "backward after an inference forward throws");
        } catch (const lattice::error &e) {
            expect(e.status() == LATTICE_ERR_STATE, "backward after inference: STATE");
        }
        {
            // two documents, the second one validation (boundary id 256)
            std::vector<int32_t> docs(ids);
            docs.push_back(256);
            docs.insert(docs.end(), ids.begin(), ids.end());
            lattice_data_params vp;
            lattice_data_params_init(&vp);
            vp.batch_size = 1;
            vp.seq_len = seq;
            vp.val_fraction = 0.5;
            lattice::data held = lattice::data::from_memory(docs, vp);
            const double val_ce = model.evaluate(held, 1);
            expect(std::isfinite(val_ce) && val_ce > 0.0, "evaluate gives a validation loss");
            expect(model.forward_shape() == std::make_pair(1, seq),
                   "after evaluate, the shape of its validation batch");
        }
        {
            // The shape is the model's, whichever call ran the forward: a teacher's
            // logits on this model ran a 1 x seq forward after this wrapper's 1 x 2, so a
            // loss with 2 targets is refused (it read seq of them), and logits() covers seq.
            model.forward(all.subspan(0, 2), 1, 2);
            expect(model.logits().size() == 2u * 257u, "logits() of a 1 x 2 forward");
            lattice::teacher own = lattice::teacher::from_model(model);
            own.logits(all.subspan(0, static_cast<std::size_t>(seq)), 1, seq);
            expect(model.logits().size() == static_cast<std::size_t>(seq) * 257u,
                   "logits() covers the teacher's 1 x seq forward");
            expect_throws([&] { model.cross_entropy(all.subspan(1, 2)); },
                          LATTICE_ERR_INVALID_ARGUMENT, "fewer targets than positions",
                          "targets checked against a forward the library ran since");
            // a change of active layers drops the activations: no view over nothing
            model.set_active_layers(model.active_layers());
            expect_throws([&] { model.logits(); }, LATTICE_ERR_STATE, "no forward's activations",
                          "logits() after the active layers changed");
            expect_throws([&] { model.forward_shape(); }, LATTICE_ERR_STATE,
                          "no forward's activations", "forward_shape() with none held");
        }

        // A deliberate error on an object: a sequence beyond the model's max_seq.
        std::vector<int32_t> longer(static_cast<std::size_t>(seq) + 8, 1);
        try {
            model.forward(longer, 1, seq + 8);
            expect(false, "forward beyond max_seq throws");
        } catch (const lattice::error &e) {
            std::printf("caught: %s\n", e.what());
            expect(e.status() == LATTICE_ERR_INVALID_ARGUMENT, "the status travels");
            expect(!e.errmsg().empty(), "the model's errmsg travels");
            expect(std::strstr(e.what(), e.errmsg().c_str()) != nullptr, "what() holds errmsg");
        }
        // Every factory's failure carries the reason of its own call, read from
        // lattice_last_error() at once: never the model's message from the
        // failed forward above, nor a bare "invalid configuration".
        expect_throws([] { lattice::backend::create("no-such-backend"); }, LATTICE_ERR_NOT_FOUND,
                      "no backend named 'no-such-backend'", "backend::create");
        expect_throws([] { lattice::norm::create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, -1.0f); },
                      LATTICE_ERR_INVALID_ARGUMENT, "eps", "norm::create");
        expect_throws([&] {
            lattice_model_params bad = mp;
            bad.head_dim = 0;
            lattice::model::create(bad, lattice::norm::create(LATTICE_NORM_PLACEMENT_PRE), backend);
        }, LATTICE_ERR_INVALID_CONFIG, "head_dim", "model::create");
        expect_throws([&] { model.grown(1); }, LATTICE_ERR_INVALID_ARGUMENT,
                      "n_layers 1 is below the model's 2 layers", "model::grown");
        expect_throws([&] { lattice::model::from_file("/nonexistent/m.safetensors", nullptr, backend, 1, 8); },
                      LATTICE_ERR_IO, "/nonexistent/m.safetensors", "model::from_file");
        expect_throws([&] { model.save_config("/nonexistent/dir/config.json"); }, LATTICE_ERR_IO,
                      "/nonexistent/dir", "model::save_config");
        model.forward(all.subspan(0, static_cast<std::size_t>(seq)), 1, seq);
        try {
            model.forward(longer, 1, seq + 8); // the model's message is now about seq
        } catch (const lattice::error &) {
        }
        expect_throws([&] {
            lattice_optim_params op;
            lattice_optim_params_init(&op);
            op.lr = -1.0f;
            lattice::optim::create(model, op);
        }, LATTICE_ERR_INVALID_CONFIG, "learning rates", "optim::create after a model error");
        expect_throws([] {
            lattice_distill_params kp;
            lattice_distill_params_init(&kp);
            kp.tau = 0.0f;
            lattice::distill::create(kp);
        }, LATTICE_ERR_INVALID_CONFIG, "tau 0", "distill::create");
        expect_throws([] { lattice::schedule::preset(LATTICE_SCHEDULE_PRESET_GROW, 0, 1, 10); },
                      LATTICE_ERR_INVALID_CONFIG, "n_blocks 0", "schedule::preset");
        expect_throws([] { lattice::teacher::from_file("/nonexistent/t.logits"); }, LATTICE_ERR_IO,
                      "/nonexistent/t.logits", "teacher::from_file");
        expect_throws([] {
            lattice::model none;
            lattice::teacher::from_model(none);
        }, LATTICE_ERR_INVALID_ARGUMENT, "model", "teacher::from_model");
        expect_throws([] {
            lattice::model none;
            lattice::diag::create(none);
        }, LATTICE_ERR_INVALID_ARGUMENT, "model", "diag::create");
        expect_throws([&] {
            lattice_data_params dp;
            lattice_data_params_init(&dp);
            dp.seq_len = seq;
            lattice::data::from_tokens("/nonexistent/ids.bin", 2, dp);
        }, LATTICE_ERR_IO, "/nonexistent/ids.bin", "data::from_tokens");
        expect_throws([&] {
            lattice_data_params dp;
            lattice_data_params_init(&dp);
            dp.batch_size = 0;
            lattice::data::from_memory(all, dp);
        }, LATTICE_ERR_INVALID_CONFIG, "batch_size", "data::from_memory");
        expect_throws([&] {
            lattice_data_params dp;
            lattice_data_params_init(&dp);
            dp.batch_size = 1;
            dp.seq_len = seq;
            lattice::data d = lattice::data::from_memory(all, dp);
            lattice::schedule s = lattice::schedule::preset(LATTICE_SCHEDULE_PRESET_JOINT, 1, 9, 3);
            lattice::trainer::create(model, nullptr, nullptr, d, moved, s);
        }, LATTICE_ERR_INVALID_CONFIG, "grows to 9 layers but the model has 2", "trainer::create");
        // A failed create: the message comes from the create call.
        try {
            lattice_data_params dp;
            lattice_data_params_init(&dp);
            lattice::data::from_text("/nonexistent/lattice-corpus.txt", dp);
            expect(false, "a missing corpus throws");
        } catch (const lattice::error &e) {
            std::printf("caught: %s\n", e.what());
            expect(e.status() == LATTICE_ERR_IO, "missing file: LATTICE_ERR_IO");
            expect(e.errmsg().find("lattice-corpus.txt") != std::string::npos,
                   "the message names the file");
        }
        // And check() for any C call the wrapper does not cover.
        try {
            lattice::check(lattice_model_set_active_layers(model.get(), 99), model);
            expect(false, "check() throws");
        } catch (const lattice::error &e) {
            expect(e.status() != LATTICE_OK && !e.errmsg().empty(), "check() carries errmsg");
        }
        std::printf("liblattice %s from C++ (%s)\n", lattice_version_string(),
#ifdef LATTICE_HPP_STD_SPAN
                    "std::span"
#else
                    "lattice::span"
#endif
        );
    } catch (const std::exception &e) {
        std::fprintf(stderr, "unexpected: %s\n", e.what());
        return 1;
    }
    return failures ? 1 : 0;
}
