//! The hot decoders compiled twice: for any x86-64 (SSE2) and for CPUs
//! with AVX2, BMI1/2, LZCNT and POPCNT (x86-64-v3: every x86 server CPU
//! since about 2015), chosen at run time. The second lets the compiler
//! shift by a register in one instruction (BMI2), divide and compare
//! four 64-bit lanes at once (AVX2): a column of a group block decodes
//! about a fifth faster. Both are the same Rust code: integer arithmetic
//! and IEEE divisions give the same bits either way (Rust never fuses a
//! multiply and an add on its own), and a property test compares them.

/// Whether this CPU runs the x86-64-v3 versions (detected once; the
/// standard library keeps the answer).
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn v3() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("bmi2")
        && std::arch::is_x86_feature_detected!("lzcnt")
        && std::arch::is_x86_feature_detected!("popcnt")
}

/// Defines `$name` calling `$plain` (an `#[inline(always)]` function of
/// the same arguments) compiled for x86-64-v3 when the CPU has it, else
/// as it is.
macro_rules! dispatch {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($a:ident: $t:ty),* $(,)?) -> $r:ty = $plain:path) => {
        $(#[$m])*
        $vis fn $name($($a: $t),*) -> $r {
            #[cfg(target_arch = "x86_64")]
            {
                /// # Safety
                /// Only on a CPU with every feature enabled here.
                #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
                unsafe fn v3_build($($a: $t),*) -> $r {
                    $plain($($a),*)
                }
                if $crate::block::wide::v3() {
                    // SAFETY: `v3` found every feature `v3_build` is
                    // compiled for on this CPU.
                    return unsafe { v3_build($($a),*) };
                }
            }
            $plain($($a),*)
        }
    };
}

pub(crate) use dispatch;
