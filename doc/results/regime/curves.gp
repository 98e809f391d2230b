set datafile separator ','
set key outside right
set grid
set ylabel 'validation CE (nats/byte)'
set terminal pngcairo size 1200,650
set output 'doc/results/regime/curves_steps.png'
set xlabel 'steps'
set title 'mean over 3 seeds, band = min..max'
unset arrow
set arrow from 1736, graph 0 to 1736, graph 1 nohead dt 2 lc 'gray'
set arrow from 3472, graph 0 to 3472, graph 1 nohead dt 2 lc 'gray'
plot 'doc/results/regime/bands.csv' index 0 using 2:5:6 with filledcurves lc rgb '#1f4e9c' fs transparent solid 0.15 notitle, 'doc/results/regime/bands.csv' index 0 using 2:4 with linespoints lw 2 dt 1 pt 1 ps 0.6 lc rgb '#1f4e9c' title 'pre-joint', 'doc/results/regime/bands.csv' index 1 using 2:5:6 with filledcurves lc rgb '#b3261e' fs transparent solid 0.15 notitle, 'doc/results/regime/bands.csv' index 1 using 2:4 with linespoints lw 2 dt 1 pt 2 ps 0.6 lc rgb '#b3261e' title 'post-joint', 'doc/results/regime/bands.csv' index 2 using 2:5:6 with filledcurves lc rgb '#4a86e8' fs transparent solid 0.15 notitle, 'doc/results/regime/bands.csv' index 2 using 2:4 with linespoints lw 2 dt 2 pt 3 ps 0.6 lc rgb '#4a86e8' title 'pre-grow', 'doc/results/regime/bands.csv' index 3 using 2:5:6 with filledcurves lc rgb '#e06666' fs transparent solid 0.15 notitle, 'doc/results/regime/bands.csv' index 3 using 2:4 with linespoints lw 2 dt 2 pt 4 ps 0.6 lc rgb '#e06666' title 'post-grow'
set terminal pngcairo size 1200,650
set output 'doc/results/regime/curves_active_layer_tokens.png'
set xlabel 'active-layer tokens'
set title 'mean over 3 seeds, band = min..max'
unset arrow
plot 'doc/results/regime/bands.csv' index 0 using 3:5:6 with filledcurves lc rgb '#1f4e9c' fs transparent solid 0.15 notitle, 'doc/results/regime/bands.csv' index 0 using 3:4 with linespoints lw 2 dt 1 pt 1 ps 0.6 lc rgb '#1f4e9c' title 'pre-joint', 'doc/results/regime/bands.csv' index 1 using 3:5:6 with filledcurves lc rgb '#b3261e' fs transparent solid 0.15 notitle, 'doc/results/regime/bands.csv' index 1 using 3:4 with linespoints lw 2 dt 1 pt 2 ps 0.6 lc rgb '#b3261e' title 'post-joint', 'doc/results/regime/bands.csv' index 2 using 3:5:6 with filledcurves lc rgb '#4a86e8' fs transparent solid 0.15 notitle, 'doc/results/regime/bands.csv' index 2 using 3:4 with linespoints lw 2 dt 2 pt 3 ps 0.6 lc rgb '#4a86e8' title 'pre-grow', 'doc/results/regime/bands.csv' index 3 using 3:5:6 with filledcurves lc rgb '#e06666' fs transparent solid 0.15 notitle, 'doc/results/regime/bands.csv' index 3 using 3:4 with linespoints lw 2 dt 2 pt 4 ps 0.6 lc rgb '#e06666' title 'post-grow'
set terminal svg size 1200,650
set output 'doc/results/regime/curves_steps.svg'
set xlabel 'steps'
set title 'mean over 3 seeds, band = min..max'
unset arrow
set arrow from 1736, graph 0 to 1736, graph 1 nohead dt 2 lc 'gray'
set arrow from 3472, graph 0 to 3472, graph 1 nohead dt 2 lc 'gray'
plot 'doc/results/regime/bands.csv' index 0 using 2:5:6 with filledcurves lc rgb '#1f4e9c' fs transparent solid 0.15 notitle, 'doc/results/regime/bands.csv' index 0 using 2:4 with linespoints lw 2 dt 1 pt 1 ps 0.6 lc rgb '#1f4e9c' title 'pre-joint', 'doc/results/regime/bands.csv' index 1 using 2:5:6 with filledcurves lc rgb '#b3261e' fs transparent solid 0.15 notitle, 'doc/results/regime/bands.csv' index 1 using 2:4 with linespoints lw 2 dt 1 pt 2 ps 0.6 lc rgb '#b3261e' title 'post-joint', 'doc/results/regime/bands.csv' index 2 using 2:5:6 with filledcurves lc rgb '#4a86e8' fs transparent solid 0.15 notitle, 'doc/results/regime/bands.csv' index 2 using 2:4 with linespoints lw 2 dt 2 pt 3 ps 0.6 lc rgb '#4a86e8' title 'pre-grow', 'doc/results/regime/bands.csv' index 3 using 2:5:6 with filledcurves lc rgb '#e06666' fs transparent solid 0.15 notitle, 'doc/results/regime/bands.csv' index 3 using 2:4 with linespoints lw 2 dt 2 pt 4 ps 0.6 lc rgb '#e06666' title 'post-grow'
set terminal svg size 1200,650
set output 'doc/results/regime/curves_active_layer_tokens.svg'
set xlabel 'active-layer tokens'
set title 'mean over 3 seeds, band = min..max'
unset arrow
plot 'doc/results/regime/bands.csv' index 0 using 3:5:6 with filledcurves lc rgb '#1f4e9c' fs transparent solid 0.15 notitle, 'doc/results/regime/bands.csv' index 0 using 3:4 with linespoints lw 2 dt 1 pt 1 ps 0.6 lc rgb '#1f4e9c' title 'pre-joint', 'doc/results/regime/bands.csv' index 1 using 3:5:6 with filledcurves lc rgb '#b3261e' fs transparent solid 0.15 notitle, 'doc/results/regime/bands.csv' index 1 using 3:4 with linespoints lw 2 dt 1 pt 2 ps 0.6 lc rgb '#b3261e' title 'post-joint', 'doc/results/regime/bands.csv' index 2 using 3:5:6 with filledcurves lc rgb '#4a86e8' fs transparent solid 0.15 notitle, 'doc/results/regime/bands.csv' index 2 using 3:4 with linespoints lw 2 dt 2 pt 3 ps 0.6 lc rgb '#4a86e8' title 'pre-grow', 'doc/results/regime/bands.csv' index 3 using 3:5:6 with filledcurves lc rgb '#e06666' fs transparent solid 0.15 notitle, 'doc/results/regime/bands.csv' index 3 using 3:4 with linespoints lw 2 dt 2 pt 4 ps 0.6 lc rgb '#e06666' title 'post-grow'
