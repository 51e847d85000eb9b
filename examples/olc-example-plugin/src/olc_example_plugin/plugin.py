"""The olc plugin: registers the native ScaledSoftsign kernel."""

from __future__ import annotations

from olc_core import KernelRegistration, hookimpl

from . import DOMAIN, KERNEL_NAME, OP_TYPE


@hookimpl
def olc_register_kernels() -> list[KernelRegistration]:
    # Imported here so that a broken build surfaces as a registration error
    # naming this plugin, not as a failure to load olc-core's plugin list.
    from . import _kernels

    return [
        KernelRegistration(
            domain=DOMAIN,
            op_type=OP_TYPE,
            kernel_name=KERNEL_NAME,
            types={"T": ("float32",)},
            inputs=("T",),
            factory=_kernels.scaled_softsign_vtable(),
            since_version=1,
            family="example",
            description="y = alpha * x / (1 + |x|); alpha (float) defaults to 1.0",
        )
    ]
