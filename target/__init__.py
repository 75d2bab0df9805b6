"""The machine model: device, costs, routes, SRAM and collective timing."""
