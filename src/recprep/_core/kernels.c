/* recprep._core._kernels: the loops over a chunk's records that numpy can only do in
 * several passes. Optional: recprep._core.native imports this module if it was built
 * and falls back to numpy where it wasn't; both give the same results
 * (tests/codecs/test_native_kernels.py).
 *
 * Every function takes buffers (bytes, numpy arrays, Arrow buffers) and fills buffers
 * the caller allocated; none builds a Python object per record, and each releases the
 * GIL while it walks. Nothing here raises on damage: a function that finds the records
 * don't hold what it was told says False, and the caller's careful path says why.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t
load_u32(const uint8_t *p)
{
    /* little-endian, unaligned */
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

/* A limit in bytes (a PyArg "O&" converter): any int, one past what Py_ssize_t holds
 * taken as the largest it holds (no limit: recprep's limits are any positive int). */
static int
limit_arg(PyObject *obj, void *to)
{
    Py_ssize_t value = PyNumber_AsSsize_t(obj, NULL); /* NULL: clipped, not raised */
    if (value == -1 && PyErr_Occurred())
        return 0;
    *(Py_ssize_t *)to = value;
    return 1;
}

/* A buffer of int64 values, checked for its item count. */
static int
get_i64(PyObject *obj, Py_buffer *view, Py_ssize_t count, int writable, const char *what)
{
    if (PyObject_GetBuffer(obj, view, writable ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS
                                               : PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (count >= 0 && view->len != count * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd int64 values, found %zd bytes",
                     what, count, view->len);
        PyBuffer_Release(view);
        return -1;
    }
    if (view->len % (Py_ssize_t)sizeof(int64_t)) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a whole number of int64",
                     what, view->len);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ split_records */

PyDoc_STRVAR(split_records_doc,
"split_records(payload, starts, ends) -> bool\n\n"
"Cut a RecordIO chunk's payload (``[u32 length][bytes]`` per record) into as many\n"
"records as ``starts`` (a writable int64 buffer) holds: each record's first byte and\n"
"end go into ``starts`` and ``ends``. True if the records end the payload exactly;\n"
"False otherwise (a length runs past the end, the payload is short, bytes are left\n"
"over): the buffers then hold nothing to rely on.");

static PyObject *
split_records(PyObject *self, PyObject *args)
{
    PyObject *p_obj, *s_obj, *e_obj;
    Py_buffer payload, starts, ends;
    if (!PyArg_ParseTuple(args, "OOO:split_records", &p_obj, &s_obj, &e_obj))
        return NULL;
    if (PyObject_GetBuffer(p_obj, &payload, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (get_i64(s_obj, &starts, -1, 1, "starts") < 0) {
        PyBuffer_Release(&payload);
        return NULL;
    }
    Py_ssize_t count = starts.len / (Py_ssize_t)sizeof(int64_t);
    if (get_i64(e_obj, &ends, count, 1, "ends") < 0) {
        PyBuffer_Release(&starts);
        PyBuffer_Release(&payload);
        return NULL;
    }
    const uint8_t *buf = (const uint8_t *)payload.buf;
    int64_t size = (int64_t)payload.len, pos = 0;
    int64_t *s = (int64_t *)starts.buf, *e = (int64_t *)ends.buf;
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++) {
        if (pos + 4 > size) {
            ok = 0;
            break;
        }
        int64_t start = pos + 4, end = start + (int64_t)load_u32(buf + pos);
        if (end > size) {
            ok = 0;
            break;
        }
        s[i] = start;
        e[i] = end;
        pos = end;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&ends);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&payload);
    return PyBool_FromLong(ok && pos == size);
}

/* ------------------------------------------------------------------- walk_layout */

PyDoc_STRVAR(walk_layout_doc,
"walk_layout(buf, starts, ends, program, consts, positions) -> bool\n\n"
"Check every record ``buf[starts[i]:ends[i]]`` against a layout and find where its\n"
"segments begin. ``program`` (uint32 values) is ``nseg, nlen``, then per segment:\n"
"``width, runs, (offset, length, at) * runs, lens, (offset, lslot) * lens, data``: the\n"
"segment's fixed-width bytes, the runs of them every record holds (``consts[at:at +\n"
"length]`` at ``offset``), the u32 lengths read there (into ``lslot``), and the slot of\n"
"the length of the str/bytes value that follows the segment (0xFFFFFFFF: none).\n"
"``positions`` (writable int64, ``nseg * n``, a segment's row after another) gets each\n"
"record's segment starts. True if every record holds the layout exactly to its end.");

typedef struct {
    uint32_t width, runs, lens, data;
    const uint32_t *run;  /* (offset, length, at) * runs */
    const uint32_t *len;  /* (offset, lslot) * lens */
} segment;

/* The program's segments, checked against its own size and ``consts``; NULL (and an
 * exception) if it doesn't hold together. */
static segment *
parse_program(const uint32_t *prog, Py_ssize_t words, Py_ssize_t nconsts,
              uint32_t *nseg_out, uint32_t *nlen_out)
{
    if (words < 2)
        goto bad;
    uint32_t nseg = prog[0], nlen = prog[1];
    if (!nseg || nseg > (1u << 20) || nlen > (1u << 20))
        goto bad;
    segment *segs = PyMem_Calloc(nseg, sizeof(segment));
    uint8_t *seen = PyMem_Calloc(nlen ? nlen : 1, 1);  /* lengths read by now */
    if (!segs || !seen) {
        PyMem_Free(segs);
        PyMem_Free(seen);
        PyErr_NoMemory();
        return NULL;
    }
    Py_ssize_t at = 2;
    for (uint32_t k = 0; k < nseg; k++) {
        segment *g = &segs[k];
        if (at + 2 > words)
            goto bad_free;
        g->width = prog[at];
        g->runs = prog[at + 1];
        at += 2;
        if ((Py_ssize_t)g->runs > (words - at) / 3)
            goto bad_free;
        g->run = prog + at;
        for (uint32_t r = 0; r < g->runs; r++) {
            uint64_t off = g->run[3 * r], n = g->run[3 * r + 1], c = g->run[3 * r + 2];
            if (off + n > g->width || c + n > (uint64_t)nconsts)
                goto bad_free;
        }
        at += 3 * (Py_ssize_t)g->runs;
        if (at + 1 > words)
            goto bad_free;
        g->lens = prog[at++];
        if ((Py_ssize_t)g->lens > (words - at) / 2)
            goto bad_free;
        g->len = prog + at;
        for (uint32_t r = 0; r < g->lens; r++) {
            if ((uint64_t)g->len[2 * r] + 4 > g->width || g->len[2 * r + 1] >= nlen)
                goto bad_free;
            seen[g->len[2 * r + 1]] = 1;
        }
        at += 2 * (Py_ssize_t)g->lens;
        if (at + 1 > words)
            goto bad_free;
        g->data = prog[at++];
        if (g->data != 0xFFFFFFFFu && (g->data >= nlen || !seen[g->data]))
            goto bad_free;  /* a value sized by a length not read yet */
    }
    if (at != words)
        goto bad_free;
    PyMem_Free(seen);
    *nseg_out = nseg;
    *nlen_out = nlen;
    return segs;
bad_free:
    PyMem_Free(seen);
    PyMem_Free(segs);
bad:
    PyErr_SetString(PyExc_ValueError, "walk_layout: a malformed layout program");
    return NULL;
}

/* Whether the ``n`` bytes at ``a`` and ``b`` are equal: a word at a time (runs are a
 * few bytes; a call to memcmp costs more than comparing them). */
static inline int
same_bytes(const uint8_t *a, const uint8_t *b, uint32_t n)
{
    for (; n >= 8; a += 8, b += 8, n -= 8) {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y)
            return 0;
    }
    if (n >= 4) {
        uint32_t x, y;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        if (x != y)
            return 0;
        a += 4, b += 4, n -= 4;
    }
    for (; n; a++, b++, n--)
        if (*a != *b)
            return 0;
    return 1;
}

/* One record against the segments: 1 if it holds them exactly to ``end``. */
static inline int
walk_one(const uint8_t *buf, int64_t pos, int64_t end, const segment *segs, uint32_t nseg,
         const uint8_t *consts, uint32_t *lens, int64_t *positions, Py_ssize_t n,
         Py_ssize_t i)
{
    for (uint32_t k = 0; k < nseg; k++) {
        const segment *g = &segs[k];
        if (pos + (int64_t)g->width > end)
            return 0;
        const uint8_t *at = buf + pos;
        for (uint32_t r = 0; r < g->runs; r++) {
            const uint32_t *run = g->run + 3 * r;
            if (!same_bytes(at + run[0], consts + run[2], run[1]))
                return 0;
        }
        for (uint32_t r = 0; r < g->lens; r++)
            lens[g->len[2 * r + 1]] = load_u32(at + g->len[2 * r]);
        positions[(Py_ssize_t)k * n + i] = pos;
        pos += g->width;
        if (g->data != 0xFFFFFFFFu) {
            pos += lens[g->data];
            if (pos > end)
                return 0;
        }
    }
    return pos == end;
}

static PyObject *
walk_layout(PyObject *self, PyObject *args)
{
    PyObject *b_obj, *s_obj, *e_obj, *p_obj, *c_obj, *o_obj;
    if (!PyArg_ParseTuple(args, "OOOOOO:walk_layout", &b_obj, &s_obj, &e_obj, &p_obj,
                          &c_obj, &o_obj))
        return NULL;
    Py_buffer buf = {0}, starts = {0}, ends = {0}, prog = {0}, consts = {0}, out = {0};
    PyObject *result = NULL;
    segment *segs = NULL;
    uint32_t *lens = NULL, nseg = 0, nlen = 0;
    if (PyObject_GetBuffer(b_obj, &buf, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (get_i64(s_obj, &starts, -1, 0, "starts") < 0)
        goto done_buf;
    Py_ssize_t n = starts.len / (Py_ssize_t)sizeof(int64_t);
    if (get_i64(e_obj, &ends, n, 0, "ends") < 0)
        goto done_starts;
    if (PyObject_GetBuffer(p_obj, &prog, PyBUF_C_CONTIGUOUS) < 0)
        goto done_ends;
    if (PyObject_GetBuffer(c_obj, &consts, PyBUF_C_CONTIGUOUS) < 0)
        goto done_prog;
    if (prog.len % 4) {
        PyErr_SetString(PyExc_ValueError, "walk_layout: the program is not uint32 values");
        goto done_consts;
    }
    segs = parse_program((const uint32_t *)prog.buf, prog.len / 4, consts.len, &nseg,
                         &nlen);
    if (!segs)
        goto done_consts;
    if (get_i64(o_obj, &out, (Py_ssize_t)nseg * n, 1, "positions") < 0)
        goto done_segs;
    lens = PyMem_Calloc(nlen ? nlen : 1, sizeof(uint32_t));
    if (!lens) {
        PyErr_NoMemory();
        goto done_out;
    }
    const int64_t *s = (const int64_t *)starts.buf, *e = (const int64_t *)ends.buf;
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && ok; i++) {
        if (s[i] < 0 || s[i] > e[i] || e[i] > (int64_t)buf.len)
            ok = 0;
        else
            ok = walk_one((const uint8_t *)buf.buf, s[i], e[i], segs, nseg,
                          (const uint8_t *)consts.buf, lens, (int64_t *)out.buf, n, i);
    }
    Py_END_ALLOW_THREADS
    result = PyBool_FromLong(ok);
    PyMem_Free(lens);
done_out:
    PyBuffer_Release(&out);
done_segs:
    PyMem_Free(segs);
done_consts:
    PyBuffer_Release(&consts);
done_prog:
    PyBuffer_Release(&prog);
done_ends:
    PyBuffer_Release(&ends);
done_starts:
    PyBuffer_Release(&starts);
done_buf:
    PyBuffer_Release(&buf);
    return result;
}

/* ------------------------------------------------------------------ gather_spans */

PyDoc_STRVAR(gather_spans_doc,
"gather_spans(buf, pos, sizes, offsets) -> (bytes, bool)\n\n"
"The ``sizes[i]`` bytes at ``pos[i]`` of ``buf``, one span after another, as one\n"
"``bytes``, and whether any of them is 0x80 or more (text that isn't all ASCII). Where\n"
"each span begins goes into ``offsets`` (writable, ``n + 1`` int32 or int64 values, by\n"
"its size: Arrow's offsets of a binary array). ValueError if a span lies outside ``buf``\n"
"or the spans hold more than int32 offsets can say.");

static PyObject *
gather_spans(PyObject *self, PyObject *args)
{
    PyObject *b_obj, *p_obj, *z_obj, *f_obj;
    if (!PyArg_ParseTuple(args, "OOOO:gather_spans", &b_obj, &p_obj, &z_obj, &f_obj))
        return NULL;
    Py_buffer buf = {0}, pos = {0}, sizes = {0}, offs = {0};
    PyObject *result = NULL, *data = NULL;
    if (PyObject_GetBuffer(b_obj, &buf, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (get_i64(p_obj, &pos, -1, 0, "pos") < 0)
        goto done_buf;
    Py_ssize_t n = pos.len / (Py_ssize_t)sizeof(int64_t);
    if (get_i64(z_obj, &sizes, n, 0, "sizes") < 0)
        goto done_pos;
    if (PyObject_GetBuffer(f_obj, &offs, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        goto done_sizes;
    int wide = offs.len == (n + 1) * 8;
    if (!wide && offs.len != (n + 1) * 4) {
        PyErr_Format(PyExc_ValueError, "gather_spans: offsets of %zd bytes, expected %zd "
                     "int32 or int64 values", offs.len, n + 1);
        goto done_offs;
    }
    const int64_t *p = (const int64_t *)pos.buf, *z = (const int64_t *)sizes.buf;
    int64_t total = 0, limit = (int64_t)buf.len;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (p[i] < 0 || z[i] < 0 || z[i] > limit || p[i] > limit - z[i]) {
            PyErr_Format(PyExc_ValueError,
                         "gather_spans: span %zd (%lld bytes at %lld) lies outside the "
                         "%lld bytes given", i, (long long)z[i], (long long)p[i],
                         (long long)limit);
            goto done_offs;
        }
        total += z[i];
        if (total > PY_SSIZE_T_MAX / 2 || (!wide && total > INT32_MAX)) {
            PyErr_Format(PyExc_ValueError, "gather_spans: the spans hold more than %s "
                         "offsets can say", wide ? "int64" : "int32");
            goto done_offs;
        }
    }
    data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!data)
        goto done_offs;
    uint8_t high = 0;
    Py_BEGIN_ALLOW_THREADS
    uint8_t *o = (uint8_t *)PyBytes_AS_STRING(data);
    const uint8_t *b = (const uint8_t *)buf.buf;
    int64_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (wide)
            ((int64_t *)offs.buf)[i] = at;
        else
            ((int32_t *)offs.buf)[i] = (int32_t)at;
        memcpy(o + at, b + p[i], (size_t)z[i]);
        at += z[i];
    }
    if (wide)
        ((int64_t *)offs.buf)[n] = at;
    else
        ((int32_t *)offs.buf)[n] = (int32_t)at;
    for (int64_t i = 0; i < total; i++)  /* a loop the compiler makes wide */
        high |= o[i];
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(OO)", data, (high & 0x80) ? Py_True : Py_False);
    Py_DECREF(data);
done_offs:
    PyBuffer_Release(&offs);
done_sizes:
    PyBuffer_Release(&sizes);
done_pos:
    PyBuffer_Release(&pos);
done_buf:
    PyBuffer_Release(&buf);
    return result;
}

/* ------------------------------------------------------------------ gather_items */

PyDoc_STRVAR(gather_items_doc,
"gather_items(buf, pos, offset, out) -> None\n\n"
"Copy the ``size`` bytes at ``pos[i] + offset`` of ``buf`` into item ``i`` of ``out``\n"
"(writable, ``n * size`` bytes: ``size`` is its length over the ``n`` positions): a\n"
"fixed-width field of every record, made one column. ValueError if an item lies outside\n"
"``buf``: nothing is copied then.");

static PyObject *
gather_items(PyObject *self, PyObject *args)
{
    PyObject *b_obj, *p_obj, *o_obj;
    Py_ssize_t offset;
    if (!PyArg_ParseTuple(args, "OOnO:gather_items", &b_obj, &p_obj, &offset, &o_obj))
        return NULL;
    Py_buffer buf = {0}, pos = {0}, out = {0};
    PyObject *result = NULL;
    if (PyObject_GetBuffer(b_obj, &buf, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (get_i64(p_obj, &pos, -1, 0, "pos") < 0)
        goto done_buf;
    Py_ssize_t n = pos.len / (Py_ssize_t)sizeof(int64_t);
    if (PyObject_GetBuffer(o_obj, &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        goto done_pos;
    if (n ? out.len % n != 0 : out.len != 0) {
        PyErr_Format(PyExc_ValueError, "gather_items: out has %zd bytes, not a whole item "
                     "for each of %zd positions", out.len, n);
        goto done_out;
    }
    int64_t size = n ? (int64_t)(out.len / n) : 0, limit = (int64_t)buf.len;
    const int64_t *p = (const int64_t *)pos.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (offset < 0 || p[i] < 0 || p[i] > limit - size - (int64_t)offset) {
            PyErr_Format(PyExc_ValueError, "gather_items: item %zd (%lld bytes at %lld) lies"
                         " outside the %lld bytes given", i, (long long)size,
                         (long long)(p[i] + offset), (long long)limit);
            goto done_out;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    const uint8_t *b = (const uint8_t *)buf.buf + offset;
    uint8_t *o = (uint8_t *)out.buf;
    switch (size) {  /* the common widths: one load and store each */
    case 8:
        for (Py_ssize_t i = 0; i < n; i++)
            memcpy(o + 8 * i, b + p[i], 8);
        break;
    case 4:
        for (Py_ssize_t i = 0; i < n; i++)
            memcpy(o + 4 * i, b + p[i], 4);
        break;
    case 1:
        for (Py_ssize_t i = 0; i < n; i++)
            o[i] = b[p[i]];
        break;
    default:
        for (Py_ssize_t i = 0; i < n; i++)
            memcpy(o + size * i, b + p[i], (size_t)size);
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done_out:
    PyBuffer_Release(&out);
done_pos:
    PyBuffer_Release(&pos);
done_buf:
    PyBuffer_Release(&buf);
    return result;
}


/* ------------------------------------------------------------------ evenly_spaced */

PyDoc_STRVAR(evenly_spaced_doc,
"evenly_spaced(starts, ends) -> int\n\n"
"The stride of the records ``[starts[i], ends[i])`` (int64 arrays of one length) when\n"
"they are all as wide as the first and evenly spaced (no closer than that width):\n"
"where a chunk's records are the rows of one strided view. -1 otherwise, and for\n"
"no records.");

static PyObject *
evenly_spaced(PyObject *self, PyObject *args)
{
    PyObject *s_obj, *e_obj;
    Py_buffer starts, ends;
    if (!PyArg_ParseTuple(args, "OO:evenly_spaced", &s_obj, &e_obj))
        return NULL;
    if (get_i64(s_obj, &starts, -1, 0, "starts") < 0)
        return NULL;
    Py_ssize_t n = starts.len / (Py_ssize_t)sizeof(int64_t);
    if (get_i64(e_obj, &ends, n, 0, "ends") < 0) {
        PyBuffer_Release(&starts);
        return NULL;
    }
    const int64_t *s = (const int64_t *)starts.buf, *e = (const int64_t *)ends.buf;
    int64_t stride = -1;
    if (n > 0) {
        int64_t width = e[0] - s[0];
        stride = n > 1 ? s[1] - s[0] : width;
        if (width < 0 || stride < width)
            stride = -1;
        for (Py_ssize_t i = 0; stride >= 0 && i < n; i++)
            if (e[i] - s[i] != width || s[i] != s[0] + (int64_t)i * stride)
                stride = -1;
    }
    PyBuffer_Release(&ends);
    PyBuffer_Release(&starts);
    return PyLong_FromLongLong(stride);
}

/* ------------------------------------------------------------------------ CRC-32C */

/* CRC-32C (Castagnoli), as google_crc32c.value computes it: SSE 4.2's instruction where
 * the processor has it (x86-64, checked once at import), else 8 tables of 256 entries
 * (slicing by 8). */
static uint32_t crc_table[8][256];

/* The table of a reflected CRC's polynomial ``poly``, a byte at a time. */
static void
crc_byte_table(uint32_t table[256], uint32_t poly)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (poly & (0u - (c & 1u)));
        table[i] = c;
    }
}

static void
crc_tables_init(void)
{
    crc_byte_table(crc_table[0], 0x82F63B78u);
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] =
                (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

static uint32_t
crc32c_sw(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t lo = crc ^ load_u32(p), hi = load_u32(p + 4);
        crc = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
              crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^
              crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
              crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
    }
    for (; n; p++, n--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p) & 0xFF];
    return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define RECPREP_CRC_HW 1

/* Three streams at once: the instruction takes 3 cycles but starts one a cycle, so a
 * buffer is cut in three runs whose CRCs are computed together, then combined by
 * shifting one over the other's length of zeros (tables made once, at import): Mark
 * Adler's method (zlib's author; as google_crc32c and Intel's ISA-L do it), ~3x the
 * throughput of one stream. */
#define CRC_LONG 8192
#define CRC_SHORT 256
static uint32_t crc_long[4][256], crc_short[4][256];

static uint32_t
gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (; vec; vec >>= 1, mat++)
        if (vec & 1)
            sum ^= *mat;
    return sum;
}

static void
gf2_square(uint32_t *square, const uint32_t *mat)
{
    for (int n = 0; n < 32; n++)
        square[n] = gf2_times(mat, mat[n]);
}

/* the operator that appends ``len`` zero bytes (a power of two) to a CRC */
static void
crc_zeros_op(uint32_t *even, size_t len)
{
    uint32_t odd[32], row = 1;
    odd[0] = 0x82F63B78u; /* one zero bit */
    for (int n = 1; n < 32; n++, row <<= 1)
        odd[n] = row;
    gf2_square(even, odd); /* two zero bits */
    gf2_square(odd, even); /* four */
    do {                   /* one zero byte in even, two in odd, ... */
        gf2_square(even, odd);
        len >>= 1;
        if (len == 0)
            return;
        gf2_square(odd, even);
        len >>= 1;
    } while (len);
    memcpy(even, odd, sizeof(odd));
}

static void
crc_zeros(uint32_t zeros[4][256], size_t len)
{
    uint32_t op[32];
    crc_zeros_op(op, len);
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 0; k < 4; k++)
            zeros[k][n] = gf2_times(op, n << (8 * k));
}

static inline uint32_t
crc_shift(uint32_t zeros[4][256], uint32_t crc)
{
    return zeros[0][crc & 0xFF] ^ zeros[1][(crc >> 8) & 0xFF] ^
           zeros[2][(crc >> 16) & 0xFF] ^ zeros[3][crc >> 24];
}

static inline uint64_t
load_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw(uint32_t crc, const uint8_t *p, size_t n)
{
    uint64_t c0 = ~crc, c1, c2;
    for (; n && ((uintptr_t)p & 7); p++, n--)
        c0 = _mm_crc32_u8((uint32_t)c0, *p);
    for (size_t run = CRC_LONG; run >= CRC_SHORT; run = CRC_SHORT) {
        uint32_t(*zeros)[256] = run == CRC_LONG ? crc_long : crc_short;
        for (; n >= 3 * run; p += 3 * run, n -= 3 * run) {
            c1 = c2 = 0;
            for (const uint8_t *end = p + run; p < end; p += 8) {
                c0 = _mm_crc32_u64(c0, load_u64(p));
                c1 = _mm_crc32_u64(c1, load_u64(p + run));
                c2 = _mm_crc32_u64(c2, load_u64(p + 2 * run));
            }
            p -= run;
            c0 = crc_shift(zeros, (uint32_t)c0) ^ c1;
            c0 = crc_shift(zeros, (uint32_t)c0) ^ c2;
        }
        if (run == CRC_SHORT)
            break;
    }
    for (; n >= 8; p += 8, n -= 8)
        c0 = _mm_crc32_u64(c0, load_u64(p));
    uint32_t c32 = (uint32_t)c0;
    for (; n; p++, n--)
        c32 = _mm_crc32_u8(c32, *p);
    return ~c32;
}
#endif

typedef uint32_t (*crc_fn)(uint32_t, const uint8_t *, size_t);

static crc_fn crc32c = crc32c_sw;

static void
crc_init(void)
{
    crc_tables_init();
#ifdef RECPREP_CRC_HW
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        crc_zeros(crc_long, CRC_LONG);
        crc_zeros(crc_short, CRC_SHORT);
        crc32c = crc32c_hw;
    }
#endif
}

static inline uint32_t
masked(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

PyDoc_STRVAR(crc32c_value_doc,
"crc32c_value(buf, portable=False, crc=0) -> int\n\n"
"The CRC-32C of ``buf`` (what ``google_crc32c.value`` gives), as ``tfrecord_frames``\n"
"checks frames with it: by the processor's instruction where it has one, or (and with\n"
"``portable``) by tables. With ``crc`` (the CRC-32C of bytes before ``buf``), that of\n"
"them and ``buf`` together (what ``google_crc32c.extend(crc, buf)`` gives).");

/* What ``name(buf, portable=False, crc=0)`` gives (``format`` parses it): the CRC of
 * ``buf`` continuing ``crc``, by ``fast`` (when there is one) or, ``portable``, ``slow``. */
static PyObject *
crc_of_buffer(PyObject *args, const char *format, crc_fn fast, crc_fn slow)
{
    PyObject *b_obj;
    int portable = 0;
    unsigned int start = 0;
    if (!PyArg_ParseTuple(args, format, &b_obj, &portable, &start))
        return NULL;
    Py_buffer buf;
    if (PyObject_GetBuffer(b_obj, &buf, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    crc_fn run = portable || fast == NULL ? slow : fast;
    uint32_t crc;
    Py_BEGIN_ALLOW_THREADS
    crc = run((uint32_t)start, (const uint8_t *)buf.buf, (size_t)buf.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLong(crc);
}

static PyObject *
crc32c_value(PyObject *self, PyObject *args)
{
    return crc_of_buffer(args, "O|pI:crc32c_value", crc32c, crc32c_sw);
}

/* ------------------------------------------------------------------------- CRC-32 */

/* CRC-32 (IEEE, reflected: zlib's), the checksum of a RecordIO chunk: by carry-less
 * multiplication folding 32 bytes a register (AVX2's VPCLMULQDQ, where the processor
 * has it: checked once at import), 128 bytes a step in four registers, as Intel's
 * "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ" (Gopal et al., 2009)
 * sets out and Linux's crc32-pclmul does it 16 bytes a register: each 16 bytes carried
 * forward by multiplying their halves by x^(D+32) and x^(D-32) mod P (reflected), then
 * the last 16 folded to 8, 4 and reduced to 32 bits by Barrett's method. Without the
 * instruction, crc32_value isn't used (``crc32_fast`` says so): isal's SSE version is. */
static uint32_t crc32_table[256];

static uint32_t
crc32_sw(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    for (; n; p++, n--)
        crc = (crc >> 8) ^ crc32_table[(crc ^ *p) & 0xFF];
    return ~crc;
}

static crc_fn crc32_fast = NULL;

#ifdef RECPREP_CRC_HW
#include <immintrin.h>

#define CRC32_TARGET __attribute__((target("avx2,pclmul,vpclmulqdq,sse4.1")))

CRC32_TARGET static inline __m256i
fold256(__m256i x, __m256i k, const uint8_t *next)
{
    __m256i lo = _mm256_clmulepi64_epi128(x, k, 0x00);
    __m256i hi = _mm256_clmulepi64_epi128(x, k, 0x11);
    return _mm256_xor_si256(_mm256_xor_si256(lo, hi),
                            _mm256_loadu_si256((const __m256i *)next));
}

CRC32_TARGET static inline __m128i
fold128(__m128i x, __m128i k, __m128i next)
{
    __m128i lo = _mm_clmulepi64_si128(x, k, 0x00), hi = _mm_clmulepi64_si128(x, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

CRC32_TARGET static uint32_t
crc32_vpclmul(uint32_t crc, const uint8_t *p, size_t n)
{
    if (n < 256)
        return crc32_sw(crc, p, n);
    /* x^(1024+32), x^(1024-32) mod P: one 16-byte lane carried 128 bytes forward */
    const __m256i k1024 = _mm256_set_epi64x(0x14a7fe880, 0x1e88ef372, 0x14a7fe880,
                                            0x1e88ef372);
    const __m128i k128 = _mm_set_epi64x(0xccaa009e, 0x1751997d0); /* 16 bytes forward */
    const __m128i k64 = _mm_set_epi64x(0, 0x163cd6124);
    const __m128i poly = _mm_set_epi64x(0x1f7011641, 0x1db710641); /* u', P' */
    const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
    __m256i y0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)p),
                                  _mm256_set_epi32(0, 0, 0, 0, 0, 0, 0, (int)~crc));
    __m256i y1 = _mm256_loadu_si256((const __m256i *)(p + 32));
    __m256i y2 = _mm256_loadu_si256((const __m256i *)(p + 64));
    __m256i y3 = _mm256_loadu_si256((const __m256i *)(p + 96));
    for (p += 128, n -= 128; n >= 128; p += 128, n -= 128) {
        y0 = fold256(y0, k1024, p);
        y1 = fold256(y1, k1024, p + 32);
        y2 = fold256(y2, k1024, p + 64);
        y3 = fold256(y3, k1024, p + 96);
    }
    __m128i x = _mm256_castsi256_si128(y0);
    x = fold128(x, k128, _mm256_extracti128_si256(y0, 1));
    x = fold128(x, k128, _mm256_castsi256_si128(y1));
    x = fold128(x, k128, _mm256_extracti128_si256(y1, 1));
    x = fold128(x, k128, _mm256_castsi256_si128(y2));
    x = fold128(x, k128, _mm256_extracti128_si256(y2, 1));
    x = fold128(x, k128, _mm256_castsi256_si128(y3));
    x = fold128(x, k128, _mm256_extracti128_si256(y3, 1));
    for (; n >= 16; p += 16, n -= 16)
        x = fold128(x, k128, _mm_loadu_si128((const __m128i *)p));
    /* 128 bits to 64 (x^(128-32) times the low half), to 32 (adding 32 zero bits) */
    x = _mm_xor_si128(_mm_srli_si128(x, 8), _mm_clmulepi64_si128(k128, x, 0x01));
    x = _mm_xor_si128(_mm_srli_si128(x, 4),
                      _mm_clmulepi64_si128(_mm_and_si128(x, mask32), k64, 0x00));
    /* Barrett's reduction of the 64 bits left to the CRC */
    __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x, mask32), poly, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), poly, 0x00);
    uint32_t state = (uint32_t)_mm_extract_epi32(_mm_xor_si128(x, t), 1);
    return crc32_sw(~state, p, n);
}
#endif

static void
crc32_init(void)
{
    crc_byte_table(crc32_table, 0xEDB88320u);
#ifdef RECPREP_CRC_HW
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul") &&
        __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("sse4.1"))
        crc32_fast = crc32_vpclmul;
#endif
}

PyDoc_STRVAR(crc32_value_doc,
"crc32_value(buf, portable=False, crc=0) -> int\n\n"
"The CRC-32 of ``buf`` continuing ``crc`` (what ``zlib.crc32(buf, crc)`` gives): by\n"
"AVX2's carry-less multiplication where the processor has it (the module's\n"
"``crc32_fast``), else (and with ``portable``) by a table, a byte at a time (slow:\n"
"recprep then uses isal's or zlib's instead).");

static PyObject *
crc32_value(PyObject *self, PyObject *args)
{
    return crc_of_buffer(args, "O|pI:crc32_value", crc32_fast, crc32_sw);
}

/* -------------------------------------------------------------- tfrecord_frames */

PyDoc_STRVAR(tfrecord_frames_doc,
"tfrecord_frames(buf, pos, last, limit) -> (bytes, bytes)\n\n"
"The whole, sound TFRecord frames of ``buf`` from ``pos`` on (``uint64 length``, its\n"
"masked CRC-32C, the data, the data's masked CRC-32C), each starting at ``last`` or\n"
"before: where each one's data starts and ends (int64 values, as bytes), up to the\n"
"first frame that runs past ``buf``, is longer than ``limit`` or fails a CRC (which the\n"
"caller then reads the careful way, to say what is wrong).");

static PyObject *
tfrecord_frames(PyObject *self, PyObject *args)
{
    PyObject *b_obj;
    Py_ssize_t pos, last, limit;
    if (!PyArg_ParseTuple(args, "OnnO&:tfrecord_frames", &b_obj, &pos, &last, limit_arg,
                          &limit))
        return NULL;
    Py_buffer buf;
    if (PyObject_GetBuffer(b_obj, &buf, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    PyObject *result = NULL;
    int64_t size = (int64_t)buf.len, cap = 1024, n = 0;
    int64_t *found = NULL;
    if (pos < 0 || limit < 0) {
        PyErr_SetString(PyExc_ValueError, "tfrecord_frames: pos and limit must be >= 0");
        goto done;
    }
    found = PyMem_RawMalloc(2 * cap * sizeof(int64_t));
    if (!found) {
        PyErr_NoMemory();
        goto done;
    }
    int nomem = 0;
    Py_BEGIN_ALLOW_THREADS
    const uint8_t *b = (const uint8_t *)buf.buf;
    int64_t at = pos;
    while (at <= last && at + 16 <= size) {
        uint64_t length = load_u32(b + at) | ((uint64_t)load_u32(b + at + 4) << 32);
        if (length > (uint64_t)limit || (int64_t)length > size - at - 16)
            break;
        if (masked(crc32c(0, b + at, 8)) != load_u32(b + at + 8))
            break;
        int64_t start = at + 12, end = start + (int64_t)length;
        if (masked(crc32c(0, b + start, (size_t)length)) != load_u32(b + end))
            break;
        if (n == cap) {
            int64_t *more = PyMem_RawRealloc(found, 4 * cap * sizeof(int64_t));
            if (!more) {
                nomem = 1;
                break;
            }
            found = more;
            cap *= 2;
        }
        found[2 * n] = start;
        found[2 * n + 1] = end;
        n++;
        at = end + 4;
    }
    Py_END_ALLOW_THREADS
    if (nomem) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *starts = PyBytes_FromStringAndSize(NULL, n * 8);
    PyObject *ends = starts ? PyBytes_FromStringAndSize(NULL, n * 8) : NULL;
    if (starts && ends) {
        int64_t *s = (int64_t *)PyBytes_AS_STRING(starts);
        int64_t *e = (int64_t *)PyBytes_AS_STRING(ends);
        for (int64_t i = 0; i < n; i++) {
            s[i] = found[2 * i];
            e[i] = found[2 * i + 1];
        }
        result = PyTuple_Pack(2, starts, ends);
    }
    Py_XDECREF(starts);
    Py_XDECREF(ends);
done:
    PyMem_RawFree(found);
    PyBuffer_Release(&buf);
    return result;
}

/* ---------------------------------------------------------------- snappy_framed */

/* A snappy framing stream (what Go's RecordIO and cramjam.snappy.compress write): a
 * stream identifier frame, then frames of a type byte and a 3-byte length; type 0x00
 * holds a masked CRC-32C of its data and a raw snappy block of at most 64 KiB of output,
 * 0x01 the CRC and the data as it is, 0x80-0xFE are skipped, 0xFF repeats the stream
 * identifier. */
#define SNAPPY_BLOCK_MAX 65536

static const uint8_t snappy_stream_id[10] = {0xFF, 0x06, 0x00, 0x00, 's', 'N', 'a', 'P',
                                             'p', 'Y'};

/* The output size a raw snappy block's preamble (a varint of at most 5 bytes) says, and
 * where its elements start; -1 when the varint is bad or cut off. */
static int64_t
snappy_preamble(const uint8_t *p, const uint8_t *end, const uint8_t **body)
{
    uint64_t size = 0;
    for (int k = 0; k < 5 && p + k < end; k++) {
        size |= (uint64_t)(p[k] & 0x7F) << (7 * k);
        if (p[k] < 0x80) {
            *body = p + k + 1;
            return size > 0xFFFFFFFFu ? -1 : (int64_t)size;
        }
    }
    return -1;
}

/* Decode the elements of one raw snappy block from [ip, ip_end) into exactly
 * [op, op_end) (a copy reaches back no further than op's start: frames are independent).
 * 0 when the block fills its output exactly, -1 on anything else. */
static int
snappy_block(const uint8_t *ip, const uint8_t *ip_end, uint8_t *op, uint8_t *const op_end)
{
    uint8_t *const base = op;
    while (ip < ip_end) {
        const uint8_t tag = *ip++;
        size_t len, offset;
        if ((tag & 3) == 0) { /* a literal: its length in the tag, or in 1-4 bytes after */
            len = (size_t)(tag >> 2) + 1;
            if (len > 60) {
                size_t extra = len - 60;
                if ((size_t)(ip_end - ip) < extra)
                    return -1;
                len = 0;
                for (size_t k = 0; k < extra; k++)
                    len |= (size_t)ip[k] << (8 * k);
                len += 1;
                ip += extra;
            }
            if ((size_t)(ip_end - ip) < len || (size_t)(op_end - op) < len)
                return -1;
            if (len <= 16 && ip_end - ip >= 16 && op_end - op >= 16)
                memcpy(op, ip, 16); /* the bytes past len are overwritten later */
            else
                memcpy(op, ip, len);
            op += len;
            ip += len;
            continue;
        }
        if ((tag & 3) == 1) { /* a copy, offset in 11 bits */
            if (ip_end - ip < 1)
                return -1;
            len = 4 + ((tag >> 2) & 7);
            offset = ((size_t)(tag >> 5) << 8) | ip[0];
            ip += 1;
        } else if ((tag & 3) == 2) { /* a copy, offset in 2 bytes */
            if (ip_end - ip < 2)
                return -1;
            len = 1 + (tag >> 2);
            offset = (size_t)ip[0] | ((size_t)ip[1] << 8);
            ip += 2;
        } else { /* a copy, offset in 4 bytes */
            if (ip_end - ip < 4)
                return -1;
            len = 1 + (tag >> 2);
            offset = load_u32(ip);
            ip += 4;
        }
        if (offset == 0 || offset > (size_t)(op - base) || (size_t)(op_end - op) < len)
            return -1;
        const uint8_t *from = op - offset;
        if (offset >= 8 && (size_t)(op_end - op) >= len + 8) {
            /* 8 bytes at a time: each reads only bytes already written */
            for (size_t k = 0; k < len; k += 8)
                memcpy(op + k, from + k, 8);
        } else {
            for (size_t k = 0; k < len; k++)
                op[k] = from[k];
        }
        op += len;
    }
    return op == op_end ? 0 : -1;
}

/* The frames of a framing stream, checked: with out NULL, the size of their data (each
 * frame's header and its block's preamble checked); else their data decoded into exactly
 * [out, out_end), each frame's checked against its masked CRC-32C, and 0. -1 for
 * anything but a well-formed stream that starts with its identifier (the decoding pass
 * checks every frame again: a buffer another thread changes between the two passes can
 * make it fail, never write past out_end). */
static int64_t
snappy_frames(const uint8_t *b, int64_t n, uint8_t *out, uint8_t *const out_end)
{
    if (n > 0 && (n < 10 || memcmp(b, snappy_stream_id, 10) != 0))
        return -1;
    int64_t at = 0, total = 0;
    while (at < n) {
        if (n - at < 4)
            return -1;
        const uint8_t kind = b[at];
        const int64_t length = b[at + 1] | (b[at + 2] << 8) | (b[at + 3] << 16);
        const uint8_t *body = b + at + 4, *elements = body + 4;
        if (length > n - at - 4)
            return -1;
        if (kind == 0xFF && (length != 6 || memcmp(b + at, snappy_stream_id, 10) != 0))
            return -1;
        if (kind > 0x01 && kind < 0x80)
            return -1; /* reserved, unskippable */
        at += 4 + length;
        if (kind > 0x01)
            continue; /* skippable, or the identifier again */
        if (length < 4)
            return -1;
        int64_t size = kind == 0x01 ? length - 4
                                    : snappy_preamble(elements, body + length, &elements);
        if (size < 0 || size > SNAPPY_BLOCK_MAX)
            return -1;
        total += size;
        if (out == NULL)
            continue;
        if (size > out_end - out)
            return -1;
        if (kind == 0x01)
            memcpy(out, elements, (size_t)size);
        else if (snappy_block(elements, body + length, out, out + size) < 0)
            return -1;
        if (masked(crc32c(0, out, (size_t)size)) != load_u32(body))
            return -1;
        out += size;
    }
    return out == NULL ? total : (out == out_end ? 0 : -1);
}

PyDoc_STRVAR(snappy_framed_doc,
"snappy_framed(buf, limit, alloc=None) -> bytes | buffer | None\n\n"
"The data of the snappy framing stream ``buf`` (what ``cramjam.snappy.decompress``\n"
"gives), each frame's masked CRC-32C checked; None for anything else — a frame that\n"
"is malformed, fails its CRC or holds more than 64 KiB, a stream that doesn't start\n"
"with its identifier or would hold more than ``limit`` bytes — which the caller then\n"
"reads the careful way, to say what is wrong. With ``alloc``, the data is written\n"
"into ``alloc(size)`` (a writable buffer of ``size`` bytes), which is\n"
"returned; else into a new bytes.");

static PyObject *
snappy_framed(PyObject *self, PyObject *args)
{
    PyObject *b_obj, *alloc = Py_None;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "OO&|O:snappy_framed", &b_obj, limit_arg, &limit, &alloc))
        return NULL;
    Py_buffer buf;
    if (PyObject_GetBuffer(b_obj, &buf, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    const uint8_t *b = (const uint8_t *)buf.buf;
    int64_t total = snappy_frames(b, (int64_t)buf.len, NULL, NULL);
    PyObject *out = NULL;
    if (total < 0 || total > (int64_t)limit) {
        PyBuffer_Release(&buf);
        Py_RETURN_NONE;
    }
    Py_buffer dest;
    uint8_t *to;
    if (alloc == Py_None) {
        out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
        if (out == NULL) {
            PyBuffer_Release(&buf);
            return NULL;
        }
        to = (uint8_t *)PyBytes_AS_STRING(out);
    } else {
        out = PyObject_CallFunction(alloc, "n", (Py_ssize_t)total);
        if (out == NULL) {
            PyBuffer_Release(&buf);
            return NULL;
        }
        if (PyObject_GetBuffer(out, &dest, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
            PyBuffer_Release(&buf);
            Py_DECREF(out);
            return NULL;
        }
        if (dest.len != (Py_ssize_t)total) {
            PyBuffer_Release(&dest);
            PyBuffer_Release(&buf);
            Py_DECREF(out);
            PyErr_SetString(PyExc_ValueError,
                            "snappy_framed: alloc(size) gave a buffer of another size");
            return NULL;
        }
        to = (uint8_t *)dest.buf;
    }
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = snappy_frames(b, (int64_t)buf.len, to, to + total) < 0;
    Py_END_ALLOW_THREADS
    if (alloc != Py_None)
        PyBuffer_Release(&dest);
    PyBuffer_Release(&buf);
    if (failed) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

/* ------------------------------------------------------------------------ module */

static PyMethodDef methods[] = {
    {"split_records", split_records, METH_VARARGS, split_records_doc},
    {"walk_layout", walk_layout, METH_VARARGS, walk_layout_doc},
    {"gather_spans", gather_spans, METH_VARARGS, gather_spans_doc},
    {"gather_items", gather_items, METH_VARARGS, gather_items_doc},
    {"crc32c_value", crc32c_value, METH_VARARGS, crc32c_value_doc},
    {"crc32_value", crc32_value, METH_VARARGS, crc32_value_doc},
    {"evenly_spaced", evenly_spaced, METH_VARARGS, evenly_spaced_doc},
    {"tfrecord_frames", tfrecord_frames, METH_VARARGS, tfrecord_frames_doc},
    {"snappy_framed", snappy_framed, METH_VARARGS, snappy_framed_doc},
    {NULL, NULL, 0, NULL},
};

static int
module_exec(PyObject *m)
{
    return PyModule_AddIntConstant(m, "crc32_fast", crc32_fast != NULL);
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, module_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#ifdef Py_mod_gil
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "recprep._core._kernels",
    "recprep's optional C loops over a chunk's records (see recprep._core.native).", 0,
    methods, slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__kernels(void)
{
    crc_init();
    crc32_init();
    return PyModuleDef_Init(&module);
}
