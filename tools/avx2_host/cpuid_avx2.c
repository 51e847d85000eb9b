/* Preloaded into a process by tools/avx2_host.py: the process sees an
 * AVX2 + FMA + F16C CPU. CPUID is made to fault (Linux ARCH_SET_CPUID,
 * "cpuid_fault" in /proc/cpuinfo: Intel CPUs and most hypervisors on them);
 * the SIGSEGV handler runs the real instruction and clears the AVX-512,
 * AMX and AVX-VNNI feature bits and the opmask/ZMM state components
 * before the result reaches the caller. Every library that asks CPUID at
 * run time (olc, onnxruntime's MLAS, numpy) then takes its AVX2 paths, so
 * the two runtimes' AVX2 kernels can be timed against each other on an
 * AVX-512 machine. For measurements only: each CPUID costs a signal. */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static void real_cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
  syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1);
  __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
  syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
}

static void on_fault(int sig, siginfo_t* info, void* context) {
  (void)sig;
  (void)info;
  greg_t* g = ((ucontext_t*)context)->uc_mcontext.gregs;
  const unsigned char* ip = (const unsigned char*)g[REG_RIP];
  if (ip[0] != 0x0f || ip[1] != 0xa2) {  /* not CPUID: a real fault */
    signal(SIGSEGV, SIG_DFL);              /* the instruction runs again and the process dies as it would */
    return;
  }
  const unsigned leaf = (unsigned)g[REG_RAX], sub = (unsigned)g[REG_RCX];
  unsigned r[4];
  real_cpuid(leaf, sub, r);
  if (leaf == 7 && sub == 0) {
    /* EBX: AVX512F, DQ, IFMA, PF, ER, CD, BW, VL */
    r[1] &= ~((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) | (1u << 30) | (1u << 31));
    /* ECX: AVX512_VBMI, VBMI2, VNNI, BITALG, VPOPCNTDQ */
    r[2] &= ~((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14));
    /* EDX: AVX512_4VNNIW, 4FMAPS, VP2INTERSECT, AMX-BF16, AVX512_FP16, AMX-TILE, AMX-INT8 */
    r[3] &= ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | (1u << 24) | (1u << 25));
  } else if (leaf == 7 && sub == 1) {
    r[0] &= ~((1u << 4) | (1u << 5)); /* AVX-VNNI, AVX512_BF16 */
  } else if (leaf == 0xd && sub == 0) {
    r[0] &= ~0xe0u; /* XSAVE components 5-7: opmask, ZMM_Hi256, Hi16_ZMM */
  }
  g[REG_RAX] = r[0];
  g[REG_RBX] = r[1];
  g[REG_RCX] = r[2];
  g[REG_RDX] = r[3];
  g[REG_RIP] += 2; /* past the two-byte CPUID */
}

__attribute__((constructor)) static void start_faulting(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, 0);
  syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0); /* inherited by the threads created later */
}
