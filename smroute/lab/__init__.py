"""The simulation lab: the real tools run for tests, the study and the
benchmarks (never imported by production code).

ibsim and the OpenSM runs (:mod:`.sim`, :mod:`.simnet`), OpenSM's engines side
by side with Dmodc (:mod:`.sidebyside`), ibdmchk as an independent checker
(:mod:`.ibdmchk`), the whole OpenSM chain of the end-to-end tests
(:mod:`.harness`) and long-running OpenSM / daemon processes
(:mod:`.processes`).
"""
