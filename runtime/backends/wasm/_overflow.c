/* The output scan of the native helper (_native.c), the C twin of the host's _may_overflow
 * (runtime/backends/wasm/abi.py), byte for byte. */
#include <stddef.h>
#include <stdint.h>

static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* 1 unless no number in [p, p+n) can be a float outside the double range: the host's
 * _may_overflow (runtime/backends/wasm/abi.py), byte for byte. A lexeme reaches 1.8e308 only
 * with an exponent of 3+ digits ('e' or 'E', an optional sign, 3 digits) or with a run of
 * 210+ digits. Conservative: digits inside strings count too. */
int32_t rt_native_may_overflow(const uint8_t *p, size_t n) {
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (is_digit(c)) {
            if (++run >= 210) return 1;
            continue;
        }
        run = 0;
        if (c == 'e' || c == 'E') {
            size_t j = i + 1;
            if (j < n && (p[j] == '+' || p[j] == '-')) j++;
            if (j + 3 <= n && is_digit(p[j]) && is_digit(p[j + 1]) && is_digit(p[j + 2]))
                return 1;
        }
    }
    return 0;
}
