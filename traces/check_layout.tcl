# Loaded by gtkwave -S with a trace and a layout: prints every facility of the trace and
# every trace the layout put on screen, then quits. tests/traces/gtkw_layout_test.cc reads it.
set n [gtkwave::getNumFacs]
for {set i 0} {$i < $n} {incr i} { puts "FAC [gtkwave::getFacName $i]" }
set t [gtkwave::getTotalNumTraces]
puts "TRACES $t"
for {set i 0} {$i < $t} {incr i} { puts "TRACE [gtkwave::getTraceNameFromIndex $i]" }
gtkwave::/File/Quit
