/*
 * lattice.hpp: a header-only C++ face of liblattice.
 *
 * Every object of the C API becomes a movable, non-copyable handle that
 * destroys it (lattice::model owns a lattice_model *, and so on); every
 * failing status becomes a lattice::error (a std::runtime_error) carrying the
 * status and lattice_last_error() of the failing call; buffers come back as lattice::span views
 * (std::span under C++20, a minimal span of the same shape under C++11..17).
 *
 * The wrapper adds no state of its own beyond the shape of a model's last
 * forward (so that logits() and hidden() know their length) and costs nothing
 * over the C calls. Everything not wrapped stays one get() away:
 *
 *     lattice::model m = lattice::model::create(params, norm, backend);
 *     lattice::check(lattice_model_set_skip(m.get(), 2, 1), m);
 *
 * Lifetimes follow the C API: a model borrows its backend, an optimizer its
 * model, a trainer everything it binds. Declare the parts before the objects
 * that borrow them, and C++ destroys them in the right order.
 *
 * Needs C++11; links with -llattice like any C program.
 */
#ifndef LATTICE_LATTICE_HPP
#define LATTICE_LATTICE_HPP

#include <lattice/lattice.h>

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#if defined(__cplusplus) && __cplusplus >= 202002L && defined(__has_include)
#if __has_include(<span>)
#include <span>
#if defined(__cpp_lib_span) && __cpp_lib_span >= 202002L
#define LATTICE_HPP_STD_SPAN 1
#endif
#endif
#endif

namespace lattice {

/* ---- views ---------------------------------------------------------------- */

#ifdef LATTICE_HPP_STD_SPAN
/** A view of a library buffer: std::span under C++20. */
template <class T> using span = std::span<T>;
#else
template <class T> class span;

namespace detail {
template <class C> struct is_span : std::false_type {};
template <class T> struct is_span<span<T> > : std::true_type {};
} // namespace detail

/** A view of a library buffer: pointer and element count, as std::span. */
template <class T> class span {
public:
    typedef T element_type;
    typedef typename std::remove_cv<T>::type value_type;
    typedef std::size_t size_type;
    typedef T *pointer;
    typedef T *iterator;
    typedef T &reference;

    span() noexcept : data_(nullptr), size_(0) {}
    span(T *data, std::size_t size) noexcept : data_(data), size_(size) {}
    /* span<float> converts to span<const float>, as std::span does */
    template <class U, class = typename std::enable_if<
                           std::is_convertible<U (*)[], T (*)[]>::value>::type>
    span(const span<U> &other) noexcept : data_(other.data()), size_(other.size()) {}
    /* a contiguous container (std::vector, std::array, std::string), as std::span */
    template <class C,
              class = typename std::enable_if<
                  !detail::is_span<typename std::remove_cv<C>::type>::value &&
                  std::is_convertible<typename std::remove_pointer<decltype(
                                          std::declval<C &>().data())>::type (*)[],
                                      T (*)[]>::value>::type>
    span(C &container) noexcept : data_(container.data()), size_(container.size()) {}

    T *data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
    bool empty() const noexcept { return size_ == 0; }
    T &operator[](std::size_t i) const { return data_[i]; }
    T &front() const { return data_[0]; }
    T &back() const { return data_[size_ - 1]; }
    T *begin() const noexcept { return data_; }
    T *end() const noexcept { return data_ + size_; }
    span subspan(std::size_t offset, std::size_t count) const { return span(data_ + offset, count); }

private:
    T *data_;
    std::size_t size_;
};
#endif

/* ---- errors --------------------------------------------------------------- */

/** A failed call: its status, and the reason the library gave for it. */
class error : public std::runtime_error {
public:
    error(lattice_status status, const std::string &errmsg)
        : std::runtime_error(describe(status, errmsg)), status_(status), errmsg_(errmsg) {}

    /** The status the C call returned. */
    lattice_status status() const noexcept { return status_; }
    /** The library's message for the failure: lattice_last_error() as it read right
     *  after the failing call (on the thread that made it). */
    const std::string &errmsg() const noexcept { return errmsg_; }

private:
    static std::string describe(lattice_status status, const std::string &errmsg)
    {
        std::string s = std::string("lattice: ") + lattice_status_string(status);
        if (!errmsg.empty())
            s += ": " + errmsg;
        return s;
    }
    lattice_status status_;
    std::string errmsg_;
};

/* The per-object message getters; objects without one (backend, norm) give "". */
inline const char *errmsg_of(const lattice_backend *) { return ""; }
inline const char *errmsg_of(const lattice_norm *) { return ""; }
inline const char *errmsg_of(const lattice_model *p) { return lattice_model_errmsg(p); }
inline const char *errmsg_of(const lattice_optim *p) { return lattice_optim_errmsg(p); }
inline const char *errmsg_of(const lattice_distill *p) { return lattice_distill_errmsg(p); }
inline const char *errmsg_of(const lattice_data *p) { return lattice_data_errmsg(p); }
inline const char *errmsg_of(const lattice_schedule *p) { return lattice_schedule_errmsg(p); }
inline const char *errmsg_of(const lattice_teacher *p) { return lattice_teacher_errmsg(p); }
inline const char *errmsg_of(const lattice_trainer *p) { return lattice_trainer_errmsg(p); }
inline const char *errmsg_of(const lattice_diag *p) { return lattice_diag_errmsg(p); }

/** Throw lattice::error unless status is LATTICE_OK. Call it on the status of
 *  the call that failed, before any other lattice call: the message is
 *  lattice_last_error(), which every failing call sets (a handle's errmsg or a
 *  caller's buffer holds the same text; an object other than the one that
 *  failed may hold an older one). errmsg, when given and not empty, is used
 *  instead (0.3's signature). */
inline void check(lattice_status status, const char *errmsg = nullptr)
{
    if (status != LATTICE_OK)
        throw error(status, errmsg && errmsg[0] ? errmsg : lattice_last_error());
}

/** As check(status): the object the call was made on does not change the message. */
template <class T> inline void check(lattice_status status, const T *)
{
    check(status);
}

/* ---- handles -------------------------------------------------------------- */

namespace detail {
inline void destroy(lattice_backend *p) { lattice_backend_destroy(p); }
inline void destroy(lattice_norm *p) { lattice_norm_destroy(p); }
inline void destroy(lattice_model *p) { lattice_model_destroy(p); }
inline void destroy(lattice_optim *p) { lattice_optim_destroy(p); }
inline void destroy(lattice_distill *p) { lattice_distill_destroy(p); }
inline void destroy(lattice_data *p) { lattice_data_destroy(p); }
inline void destroy(lattice_schedule *p) { lattice_schedule_destroy(p); }
inline void destroy(lattice_teacher *p) { lattice_teacher_destroy(p); }
inline void destroy(lattice_trainer *p) { lattice_trainer_destroy(p); }
inline void destroy(lattice_diag *p) { lattice_diag_destroy(p); }

template <class T> struct deleter {
    void operator()(T *p) const noexcept { destroy(p); }
};
} // namespace detail

/** Owns one C object: movable, not copyable, destroyed with its handle. */
template <class T> class handle {
public:
    typedef T element_type;

    handle() noexcept {}
    /** Take ownership of p (NULL gives an empty handle). */
    explicit handle(T *p) noexcept : p_(p) {}

    /** The C object, for any C call the wrapper does not cover. */
    T *get() const noexcept { return p_.get(); }
    /** Give up ownership: the caller destroys the object. */
    T *release() noexcept { return p_.release(); }
    /** Destroy the object held, then hold p. */
    void reset(T *p = nullptr) noexcept { p_.reset(p); }
    explicit operator bool() const noexcept { return static_cast<bool>(p_); }
    /** The object's last error message ("" for objects without one). */
    std::string errmsg() const { return p_ ? errmsg_of(p_.get()) : ""; }

protected:
    /** check() a call on this object: throw with the library's message on failure. */
    void check(lattice_status status) const { lattice::check(status); }

private:
    std::unique_ptr<T, detail::deleter<T> > p_;
};

/** As check(status) (0.3's signature). */
template <class T> inline void check(lattice_status status, const handle<T> &)
{
    check(status);
}

/** A compute backend ("default", "ref", "blis", "openblas"). */
class backend : public handle<lattice_backend> {
public:
    backend() noexcept {}
    explicit backend(lattice_backend *p) noexcept : handle<lattice_backend>(p) {}
    static backend create(const char *name = "default")
    {
        lattice_backend *p = nullptr;
        lattice::check(lattice_backend_create(name, &p));
        return backend(p);
    }
    const char *name() const { return lattice_backend_get_name(get()); }
    void set_threads(int n) { check(lattice_backend_set_threads(get(), n)); }
    int threads() const { return lattice_backend_get_threads(get()); }
};

/** A norm placement; a model keeps its own copy. */
class norm : public handle<lattice_norm> {
public:
    norm() noexcept {}
    explicit norm(lattice_norm *p) noexcept : handle<lattice_norm>(p) {}
    static norm create(lattice_norm_placement placement, lattice_norm_kind kind = LATTICE_NORM_KIND_RMS,
                       float eps = 1e-6f)
    {
        lattice_norm *p = nullptr;
        lattice::check(lattice_norm_create(placement, kind, eps, &p));
        return norm(p);
    }
    lattice_norm_placement placement() const { return lattice_norm_get_placement(get()); }
};

/** One parameter tensor, its values and gradient as views. */
struct tensor {
    lattice_model_tensor_info info; /**< As lattice_model_get_tensor gives it. */
    const char *name() const { return info.name; }
    std::size_t size() const { return static_cast<std::size_t>(info.shape[0] * info.shape[1]); }
    span<float> data() const { return span<float>(info.data, size()); }
    span<float> grad() const { return span<float>(info.grad, info.grad ? size() : 0); }
};

/** A transformer. Its views are valid until the next forward. */
class model : public handle<lattice_model> {
public:
    model() noexcept {}
    explicit model(lattice_model *p) noexcept : handle<lattice_model>(p) {}

    static model create(const lattice_model_params &params, const norm &n, backend &be)
    {
        lattice_model *p = nullptr;
        lattice::check(lattice_model_create(&params, n.get(), be.get(), &p));
        return model(p);
    }
    static model from_file(const char *path, const char *config_path, backend &be, int max_batch,
                           int max_seq)
    {
        char why[LATTICE_ERRMSG_SIZE] = "";
        lattice_model *p = nullptr;
        lattice::check(lattice_model_create_from_file(path, config_path, be.get(), max_batch,
                                                      max_seq, &p, why));
        return model(p);
    }

    lattice_model_params params() const
    {
        lattice_model_params p;
        lattice_model_params_init(&p);
        check(lattice_model_get_params(get(), &p));
        return p;
    }
    /** tokens holds batch * seq ids. */
    void forward(span<const int32_t> tokens, int batch, int seq)
    {
        run_forward(lattice_model_forward, "forward", tokens, batch, seq);
    }
    /** Mean cross-entropy of the last forward; fills dlogits(). mask may be empty (all count). */
    float cross_entropy(span<const int32_t> targets, span<const uint8_t> mask = span<const uint8_t>(),
                        int64_t *n_counted = nullptr)
    {
        check_targets("cross_entropy", targets, mask);
        float loss = 0.0f;
        check(lattice_model_cross_entropy(get(), targets.data(), mask.empty() ? nullptr : mask.data(),
                                          &loss, n_counted));
        return loss;
    }
    void backward() { check(lattice_model_backward(get())); }

    /** A forward for inference: keeps nothing for backward (which then refuses). */
    void forward_inference(span<const int32_t> tokens, int batch, int seq)
    {
        run_forward(lattice_model_forward_inference, "forward_inference", tokens, batch, seq);
    }
    /** Mean cross-entropy of the last forward, in double, without a gradient. */
    double cross_entropy_value(span<const int32_t> targets,
                               span<const uint8_t> mask = span<const uint8_t>(),
                               int64_t *n_counted = nullptr)
    {
        check_targets("cross_entropy_value", targets, mask);
        double ce = 0.0;
        check(lattice_model_cross_entropy_value(get(), targets.data(),
                                                mask.empty() ? nullptr : mask.data(), &ce,
                                                n_counted));
        return ce;
    }
    /** Validation cross-entropy over batches 0 .. max_batches - 1 of the data's validation split. */
    double evaluate(class data &d, int64_t max_batches);

    /** [batch, seq, vocab] of the last forward, whichever call ran it (a trainer's step, a
        teacher's logits...): its shape is the model's (lattice_model_get_forward_shape). */
    span<const float> logits() const
    {
        const std::size_t n = positions() * vocab();
        return span<const float>(lattice_model_get_logits(get()), n);
    }
    /** The buffer a loss writes and backward reads: taking it counts as writing it. */
    span<float> dlogits()
    {
        const std::size_t n = positions() * vocab();
        return span<float>(lattice_model_get_dlogits(get()), n);
    }
    /** The same buffer, to read (lattice_model_get_dlogits_const, since 1.1): it counts as
        no loss, and backward still waits for one. */
    span<const float> dlogits_const() const
    {
        const std::size_t n = positions() * vocab();
        return span<const float>(lattice_model_get_dlogits_const(get()), n);
    }
    /** The batch and seq of the last forward (since 1.1); throws LATTICE_ERR_STATE when the
        model holds none. */
    std::pair<int, int> forward_shape() const
    {
        int batch = 0, seq = 0;
        check(lattice_model_get_forward_shape(get(), &batch, &seq));
        return std::make_pair(batch, seq);
    }
    /** [batch, seq, d_model] at a layer boundary (0 .. active layers). */
    span<const float> hidden(int boundary) const
    {
        const float *out = nullptr;
        check(lattice_model_get_hidden(get(), boundary, &out));
        return span<const float>(out, positions() * static_cast<std::size_t>(params().d_model));
    }

    int n_tensors() const { return lattice_model_get_n_tensors(get()); }
    tensor tensor_at(int index) const
    {
        tensor t;
        check(lattice_model_get_tensor(get(), index, &t.info));
        return t;
    }
    tensor find_tensor(const char *name) const
    {
        tensor t;
        check(lattice_model_find_tensor(get(), name, &t.info));
        return t;
    }
    int64_t n_params() const { return lattice_model_get_n_params(get()); }
    void set_active_layers(int n) { check(lattice_model_set_active_layers(get(), n)); }
    /** A model of capacity n_layers holding this one (lattice_model_create_grown, since 1.1);
        max_batch, max_seq 0 keep this model's; be nullptr shares its backend. */
    model grown(int n_layers, int max_batch = 0, int max_seq = 0, backend *be = nullptr) const
    {
        lattice_model *p = nullptr;
        check(lattice_model_create_grown(get(), n_layers, max_batch, max_seq,
                                         be ? be->get() : nullptr, &p));
        return model(p);
    }
    int active_layers() const { return lattice_model_get_active_layers(get()); }
    void save(const char *path) const { check(lattice_model_save(get(), path)); }
    void load(const char *path) { check(lattice_model_load(get(), path)); }
    /** A Hugging Face Qwen3 config.json, flags of lattice_model_config_flag (since 0.4). */
    void save_config(const char *path, unsigned flags = 0) const
    {
        check(lattice_model_save_config(get(), path, flags));
    }

private:
    typedef lattice_status (*forward_fn)(lattice_model *, const int32_t *, int, int);
    void run_forward(forward_fn fn, const char *what, span<const int32_t> tokens, int batch, int seq)
    {
        if (batch < 0 || seq < 0 || tokens.size() < static_cast<std::size_t>(batch) * seq)
            throw error(LATTICE_ERR_INVALID_ARGUMENT,
                        std::string(what) + ": fewer tokens than batch * seq");
        check(fn(get(), tokens.data(), batch, seq));
    }
    void check_targets(const char *what, span<const int32_t> targets, span<const uint8_t> mask) const
    {
        const std::size_t n = positions();
        if (targets.size() < n || (!mask.empty() && mask.size() < n))
            throw error(LATTICE_ERR_INVALID_ARGUMENT,
                        std::string(what) + ": fewer targets than positions");
    }
    /* the model's own: a forward inside the library (a trainer, a teacher, a
       diagnostic) or a dropped one (active layers, a load) changes it unseen */
    std::size_t positions() const
    {
        const std::pair<int, int> s = forward_shape();
        return static_cast<std::size_t>(s.first) * static_cast<std::size_t>(s.second);
    }
    std::size_t vocab() const { return static_cast<std::size_t>(params().vocab_size); }
};

/** AdamW over a model's trainable tensors. */
class optim : public handle<lattice_optim> {
public:
    optim() noexcept {}
    explicit optim(lattice_optim *p) noexcept : handle<lattice_optim>(p) {}
    static optim create(model &m, const lattice_optim_params &params)
    {
        lattice_optim *p = nullptr;
        lattice::check(lattice_optim_create(m.get(), &params, &p));
        return optim(p);
    }
    /** One update; returns the gradient norm before clipping. */
    float step()
    {
        float grad_norm = 0.0f;
        check(lattice_optim_step(get(), &grad_norm));
        return grad_norm;
    }
    float lr() const { return lattice_optim_get_lr(get()); }
    int64_t steps() const { return lattice_optim_get_steps(get()); }
};

/** A distillation loss. */
class distill : public handle<lattice_distill> {
public:
    distill() noexcept {}
    explicit distill(lattice_distill *p) noexcept : handle<lattice_distill>(p) {}
    static distill create(const lattice_distill_params &params)
    {
        lattice_distill *p = nullptr;
        lattice::check(lattice_distill_create(&params, &p));
        return distill(p);
    }
};

/** A batch, owned by its data object and valid until its next batch call. */
struct batch {
    span<const int32_t> tokens;  /**< [rows, seq] inputs. */
    span<const int32_t> targets; /**< [rows, seq] next tokens. */
    span<const uint8_t> mask;    /**< [rows, seq] 1 where the target counts. */
    int rows;
    int seq;
    int64_t n_tokens;

    explicit batch(const lattice_data_batch &b)
        : tokens(b.tokens, static_cast<std::size_t>(b.batch) * b.seq),
          targets(b.targets, static_cast<std::size_t>(b.batch) * b.seq),
          mask(b.mask, static_cast<std::size_t>(b.batch) * b.seq), rows(b.batch), seq(b.seq),
          n_tokens(b.n_tokens)
    {
    }
};

/** A corpus, its split and its batches. */
class data : public handle<lattice_data> {
public:
    data() noexcept {}
    explicit data(lattice_data *p) noexcept : handle<lattice_data>(p) {}
    static data from_text(const char *path, const lattice_data_params &params)
    {
        char why[LATTICE_ERRMSG_SIZE] = "";
        lattice_data *p = nullptr;
        lattice::check(lattice_data_create_text(path, &params, &p, why));
        return data(p);
    }
    static data from_tokens(const char *path, int bytes_per_id, const lattice_data_params &params)
    {
        char why[LATTICE_ERRMSG_SIZE] = "";
        lattice_data *p = nullptr;
        lattice::check(lattice_data_create_tokens(path, bytes_per_id, &params, &p, why));
        return data(p);
    }
    static data from_memory(span<const int32_t> ids, const lattice_data_params &params)
    {
        char why[LATTICE_ERRMSG_SIZE] = "";
        lattice_data *p = nullptr;
        lattice::check(lattice_data_create_memory(ids.data(), static_cast<int64_t>(ids.size()),
                                                  &params, &p, why));
        return data(p);
    }
    batch next()
    {
        lattice_data_batch b;
        check(lattice_data_next(get(), &b));
        return batch(b);
    }
    int64_t n_val_batches() const { return lattice_data_get_n_val_batches(get()); }
    batch val_batch(int64_t index)
    {
        lattice_data_batch b;
        check(lattice_data_get_val_batch(get(), index, &b));
        return batch(b);
    }
    int64_t n_documents(lattice_data_split split = LATTICE_DATA_SPLIT_TRAIN) const
    {
        return lattice_data_get_n_documents(get(), split);
    }
    int64_t n_tokens(lattice_data_split split = LATTICE_DATA_SPLIT_TRAIN) const
    {
        return lattice_data_get_n_tokens(get(), split);
    }
};

inline double model::evaluate(class data &d, int64_t max_batches)
{
    double ce = 0.0;
    check(lattice_model_evaluate(get(), d.get(), max_batches, &ce));
    return ce;
}
/** Phases of training: depth, frozen layers, lengths. */
class schedule : public handle<lattice_schedule> {
public:
    schedule() noexcept {}
    explicit schedule(lattice_schedule *p) noexcept : handle<lattice_schedule>(p) {}
    static schedule create()
    {
        lattice_schedule *p = nullptr;
        lattice::check(lattice_schedule_create(&p));
        return schedule(p);
    }
    static schedule preset(lattice_schedule_preset preset, int n_blocks, int block_size,
                           int64_t steps_per_phase,
                           lattice_schedule_block_init block_init = LATTICE_SCHEDULE_BLOCK_INIT_RANDOM)
    {
        lattice_schedule *p = nullptr;
        lattice::check(lattice_schedule_create_preset(preset, n_blocks, block_size, steps_per_phase,
                                                      block_init, &p));
        return schedule(p);
    }
    void add_phase(const lattice_schedule_phase &phase) { check(lattice_schedule_add_phase(get(), &phase)); }
    /** Replay the shard: with on, every phase after the first starts the data
     *  where the run began (lattice_schedule_set_rewind_data); off, the
     *  iterator reads on. @since 0.4 */
    void set_rewind_data(bool on) { check(lattice_schedule_set_rewind_data(get(), on ? 1 : 0)); }
    int n_phases() const { return lattice_schedule_get_n_phases(get()); }
    bool finished() const { return lattice_schedule_is_finished(get()) != 0; }
};

/** A teacher: a model, a file of recorded logits, or a callback. */
class teacher : public handle<lattice_teacher> {
public:
    teacher() noexcept {}
    explicit teacher(lattice_teacher *p) noexcept : handle<lattice_teacher>(p) {}
    static teacher from_model(model &m)
    {
        lattice_teacher *p = nullptr;
        lattice::check(lattice_teacher_create_model(m.get(), &p));
        return teacher(p);
    }
    static teacher from_file(const char *path)
    {
        char why[LATTICE_ERRMSG_SIZE] = "";
        lattice_teacher *p = nullptr;
        lattice::check(lattice_teacher_create_file(path, &p, why));
        return teacher(p);
    }
    int vocab_size() const { return lattice_teacher_get_vocab_size(get()); }
    /** [batch, seq, vocab] logits for tokens, valid until the teacher's next call. */
    span<const float> logits(span<const int32_t> tokens, int batch, int seq)
    {
        if (batch < 0 || seq < 0 || tokens.size() < static_cast<std::size_t>(batch) * seq)
            throw error(LATTICE_ERR_INVALID_ARGUMENT, "logits: fewer tokens than batch * seq");
        const float *out = nullptr;
        check(lattice_teacher_logits(get(), tokens.data(), batch, seq, &out));
        return span<const float>(out, static_cast<std::size_t>(batch) * seq * vocab_size());
    }
};

/** Binds model, data, optimizer, schedule (and a teacher) and runs the steps. */
class trainer : public handle<lattice_trainer> {
public:
    trainer() noexcept {}
    explicit trainer(lattice_trainer *p) noexcept : handle<lattice_trainer>(p) {}
    /** t and d may be null (no distillation); params may be null (defaults). */
    static trainer create(model &m, teacher *t, distill *d, data &corpus, optim &o, schedule &s,
                          const lattice_trainer_params *params = nullptr)
    {
        lattice_trainer *p = nullptr;
        lattice::check(lattice_trainer_create(m.get(), t ? t->get() : nullptr,
                                              d ? d->get() : nullptr, corpus.get(), o.get(),
                                              s.get(), params, &p));
        return trainer(p);
    }
    lattice_trainer_metrics step()
    {
        lattice_trainer_metrics m = lattice_trainer_metrics();
        m.size = sizeof(m); // the library writes no more than the caller says it has
        check(lattice_trainer_step(get(), &m));
        return m;
    }
    void run() { check(lattice_trainer_run(get())); }
    double evaluate()
    {
        double ce = 0.0;
        check(lattice_trainer_evaluate(get(), &ce));
        return ce;
    }
    void save_checkpoint(const char *path) { check(lattice_trainer_save_checkpoint(get(), path)); }
    void load_checkpoint(const char *path) { check(lattice_trainer_load_checkpoint(get(), path)); }
    /** With lattice_trainer_load_flag values (since 0.4). */
    void load_checkpoint(const char *path, unsigned flags)
    {
        check(lattice_trainer_load_checkpoint_flags(get(), path, flags));
    }
    /** Run data-parallel over the ranks of a collective
     *  (lattice_trainer_set_collective): ops is copied, user is passed to its
     *  slots and must outlive the attachment. Collective: every rank calls it,
     *  and a setup that differs between ranks throws on every rank. Over MPI,
     *  liblattice-mpi's table is attached with
     *  lattice::check(lattice_dist_attach(dist, t.get())). @since 0.4 */
    void set_collective(const lattice_trainer_collective &ops, void *user)
    {
        check(lattice_trainer_set_collective(get(), &ops, user));
    }
    /** Run alone again (lattice_trainer_set_collective with NULL). @since 0.4 */
    void detach_collective() { check(lattice_trainer_set_collective(get(), nullptr, nullptr)); }
};

/** Diagnostics of a model. */
class diag : public handle<lattice_diag> {
public:
    diag() noexcept {}
    explicit diag(lattice_diag *p) noexcept : handle<lattice_diag>(p) {}
    static diag create(model &m)
    {
        lattice_diag *p = nullptr;
        lattice::check(lattice_diag_create(m.get(), &p));
        return diag(p);
    }
};

} // namespace lattice

#endif
