"""Example third-party olc kernel plugin: ``com.example`` ``ScaledSoftsign``.

Installing the wheel is all it takes: olc-core finds :mod:`olc_example_plugin.plugin`
through the ``olc.kernels`` entry-point group.
"""

DOMAIN = "com.example"
OP_TYPE = "ScaledSoftsign"
KERNEL_NAME = "olc_example::ScaledSoftsign"

__all__ = ["DOMAIN", "KERNEL_NAME", "OP_TYPE"]
